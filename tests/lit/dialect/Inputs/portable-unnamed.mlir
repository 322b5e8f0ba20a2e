module {
  module attributes {sam.tensors = []} {
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  }
}
