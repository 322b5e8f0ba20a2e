func.func @ops() {
  %0 = "sam.root"() {tensor = "B"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "compressed", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "B"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  %3 = "sam.load"(%1) {tensor = "B"} : (!sam.ref) -> !sam.val<f32>
  %4 = "sam.reduce"(%3) {index_var = "i", kind = "sum", operandSegmentSizes = array<i32: 1, 0>} : (!sam.val<f32>) -> !sam.val<f32>
  "sam.write_val"(%4) {tensor = "x"} : (!sam.val<f32>) -> ()
  return
}
