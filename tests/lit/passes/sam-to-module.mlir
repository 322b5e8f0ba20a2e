// RUN: fuseflow-opt %s --sam-to-module | filecheck %s
// A bare pass flag takes no options: the file after it is the input, not its options.
// RUN: fuseflow-opt --sam-to-module %s | filecheck %s
// The portable form is what C++ MLIR tools read: every sam op of dialect/roundtrip.mlir, fork and
// join segments and tile values included, parses and verifies in torch-mlir-opt against the
// dumped IRDL, and module-to-sam restores the text fuseflow-opt printed, byte for byte.
// RUN: fuseflow-opt --emit-irdl > %t.irdl
// RUN: fuseflow-opt %S/../dialect/roundtrip.mlir > %t.sam
// RUN: fuseflow-opt %t.sam --sam-to-module | %torch-mlir-opt --irdl-file=%t.irdl --verify-each | fuseflow-opt --module-to-sam > %t.back
// RUN: diff %t.sam %t.back
// The C++ verifier checks the ops it reads: a scan whose coordinate result is a ref is refused.
// RUN: not %torch-mlir-opt --irdl-file=%t.irdl --verify-each %S/../dialect/Inputs/portable-invalid.mlir 2>&1 | filecheck %s --check-prefix=INVALID

// CHECK: module attributes {sam.outputs = ["x"]} {
// CHECK-NOT: "sam.graph"
// CHECK-NEXT: module @spmv attributes {sam.tensors = [{levels = ["dense"], mode_order = [0], name = "A", role = "input", shape = [4]}, {{.*}}name = "x", role = "output"
// CHECK-NEXT: %[[R:.*]] = "sam.root"() {tensor = "A"} : () -> !sam.ref
// CHECK-NEXT: %[[S:.*]]:2 = "sam.scan"(%[[R]])
// CHECK-NEXT: "sam.load"(%[[S]]#0)
// CHECK: "sam.write_val"
// CHECK-NEXT: }
// CHECK-NEXT: }
// INVALID: portable-invalid.mlir:4:{{[0-9]+}}: error: expected base type 'sam.crd' but got 'sam.ref'
module attributes {sam.outputs = ["x"]} {
  "sam.graph"() ({
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
    %1:2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
    %2 = "sam.load"(%1#0) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
    %3 = "sam.reduce"(%2) {index_var = "i", kind = "sum", operandSegmentSizes = array<i32: 1, 0>} : (!sam.val<f32>) -> !sam.val<f32>
    "sam.write_val"(%3) {tensor = "x"} : (!sam.val<f32>) -> ()
  }) {sym_name = "spmv", tensors = [{levels = ["dense"], mode_order = [0], name = "A", role = "input", shape = [4]}, {levels = [], mode_order = [], name = "x", role = "output", shape = []}]} : () -> ()
}
