module {
  module @bad attributes {sam.tensors = []} {
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
    %1:2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.ref)
  }
}
