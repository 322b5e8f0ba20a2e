// RUN: fuseflow-opt %s | fuseflow-opt | filecheck %s
// Every sam op parses, verifies and prints back in the generic form.

// CHECK-LABEL: "sam.graph"
// CHECK-NEXT: %[[R:.*]] = "sam.root"() {tensor = "B"} : () -> !sam.ref
// CHECK: %[[S:.*]]:2 = "sam.scan"(%[[R]]) {{.*}}format = "compressed"
// CHECK: "sam.locate"
// CHECK: "sam.intersect"
// CHECK: "sam.union"
// CHECK: "sam.repsiggen"
// CHECK: "sam.repeat"
// CHECK: "sam.load"
// CHECK: "sam.alu"
// CHECK: "sam.reduce"
// CHECK: "sam.spacc"
// CHECK: "sam.crd_drop"
// CHECK: "sam.val_drop"
// CHECK: "sam.concat"
// CHECK: "sam.fork"
// CHECK: "sam.join"
// CHECK: "sam.write_crd"
// CHECK: "sam.write_val"
// CHECK: }) {sym_name = "all_ops"
"sam.graph"() ({
  %0 = "sam.root"() {tensor = "B"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "compressed", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "B"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  %3 = "sam.locate"(%2, %0) {dim = 4 : i64, index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "C"} : (!sam.crd, !sam.ref) -> !sam.ref
  %4:3 = "sam.intersect"(%2, %2, %1, %3) {index_var = "i", operandSegmentSizes = array<i32: 2, 2, 0>, resultSegmentSizes = array<i32: 1, 2, 0>} : (!sam.crd, !sam.crd, !sam.ref, !sam.ref) -> (!sam.crd, !sam.ref, !sam.ref)
  %5:3 = "sam.union"(%2, %2, %1, %3) {index_var = "i", operandSegmentSizes = array<i32: 2, 2, 0>, resultSegmentSizes = array<i32: 1, 2, 0>} : (!sam.crd, !sam.crd, !sam.ref, !sam.ref) -> (!sam.crd, !sam.ref, !sam.ref)
  %6 = "sam.repsiggen"(%2) : (!sam.crd) -> !sam.rsig
  %7 = "sam.repeat"(%0, %6) {index_var = "i", tensor = "c"} : (!sam.ref, !sam.rsig) -> !sam.ref
  %8 = "sam.load"(%4#1) {tensor = "B"} : (!sam.ref) -> !sam.val<f32>
  %9 = "sam.alu"(%8, %8) {op = "mul", operandSegmentSizes = array<i32: 1, 1>, scalar = 0.0 : f32} : (!sam.val<f32>, !sam.val<f32>) -> !sam.val<f32>
  %10 = "sam.reduce"(%9) {index_var = "i", kind = "sum", operandSegmentSizes = array<i32: 1, 0>} : (!sam.val<f32>) -> !sam.val<f32>
  %11:2 = "sam.spacc"(%2, %2, %9) {index_var = "j", kind = "sum", order = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1>} : (!sam.crd, !sam.crd, !sam.val<f32>) -> (!sam.crd, !sam.val<f32>)
  %12:2 = "sam.crd_drop"(%2, %4#0) : (!sam.crd, !sam.crd) -> (!sam.crd, !sam.crd)
  %13:2 = "sam.val_drop"(%2, %9) : (!sam.crd, !sam.val<f32>) -> (!sam.crd, !sam.val<f32>)
  %14 = "sam.concat"(%2, %2) {index_var = "i", operandSegmentSizes = array<i32: 2>} : (!sam.crd, !sam.crd) -> !sam.crd
  %15:2 = "sam.fork"(%2) {depth = 0 : i64, factor = 2 : i64, index_var = "i", resultSegmentSizes = array<i32: 2>} : (!sam.crd) -> (!sam.crd, !sam.crd)
  %16 = "sam.join"(%15#0, %15#1) {depth = 0 : i64, factor = 2 : i64, index_var = "i", operandSegmentSizes = array<i32: 2>} : (!sam.crd, !sam.crd) -> !sam.crd
  "sam.write_crd"(%12#0) {format = "compressed", level = 0 : i64, mode = 0 : i64, operandSegmentSizes = array<i32: 1, 0>, tensor = "x"} : (!sam.crd) -> ()
  "sam.write_val"(%10) {tensor = "x"} : (!sam.val<f32>) -> ()
}) {sym_name = "all_ops", tensors = [{name = "B", role = "input", shape = [4], levels = ["compressed"], mode_order = [0]}]} : () -> ()

// CHECK-LABEL: "sam.graph"
// CHECK: "sam.union"{{.*}} -> (!sam.crd, !sam.ref, !sam.val<f32>)
// CHECK: sym_name = "value_payload"
"sam.graph"() ({
  %0 = "sam.root"() {tensor = "B"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "compressed", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "B"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  %3 = "sam.load"(%1) {tensor = "B"} : (!sam.ref) -> !sam.val<f32>
  %4:3 = "sam.union"(%2, %2, %1, %3) {index_var = "i", operandSegmentSizes = array<i32: 2, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>} : (!sam.crd, !sam.crd, !sam.ref, !sam.val<f32>) -> (!sam.crd, !sam.ref, !sam.val<f32>)
  "sam.write_val"(%4#2) {tensor = "x"} : (!sam.val<f32>) -> ()
}) {sym_name = "value_payload", tensors = []} : () -> ()

// CHECK-LABEL: "sam.graph"
// CHECK: !sam.val<tensor<16x16xf32>>
// CHECK: sym_name = "tile_values"
"sam.graph"() ({
  %0 = "sam.root"() {tensor = "W"} : () -> !sam.ref
  %1 = "sam.load"(%0) {tensor = "W"} : (!sam.ref) -> !sam.val<tensor<16x16xf32>>
  "sam.write_val"(%1) {tensor = "y"} : (!sam.val<tensor<16x16xf32>>) -> ()
}) {sym_name = "tile_values", tensors = []} : () -> ()
