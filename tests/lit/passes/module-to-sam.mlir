// RUN: fuseflow-opt %s --split-input-file --module-to-sam --verify-diagnostics
// RUN: not fuseflow-opt %s --split-input-file --module-to-sam 2>&1 | filecheck %s
// A nested module carrying sam.tensors becomes a sam.graph again (the module's name its sym_name,
// sam.k attributes k); other nested modules stay; the dialect's verifiers check every op.

// CHECK: module attributes {sam.outputs = ["x"]} {
// CHECK-NEXT: "sam.graph"() ({
// CHECK-NEXT: "sam.root"() {tensor = "A"}
// CHECK: }) {sym_name = "spmv", tensors = [{levels = ["dense"]
// CHECK: module @other {
module attributes {sam.outputs = ["x"]} {
  module @spmv attributes {sam.tensors = [{levels = ["dense"], mode_order = [0], name = "A", role = "input", shape = [4]}, {levels = [], mode_order = [], name = "x", role = "output", shape = []}]} {
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
    %1:2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
    %2 = "sam.load"(%1#0) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
    %3 = "sam.reduce"(%2) {index_var = "i", kind = "sum", operandSegmentSizes = array<i32: 1, 0>} : (!sam.val<f32>) -> !sam.val<f32>
    "sam.write_val"(%3) {tensor = "x"} : (!sam.val<f32>) -> ()
  }
  module @other {
  }
}

// -----

module {
  // expected-error @+1 {{module-to-sam: a portable sam graph needs a name (module @name)}}
  module attributes {sam.tensors = []} {
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  }
}

// -----

module {
  // The dialect's own verifiers check the ops (C++ checks only types): 'sparse' is no level format.
  module @bad attributes {sam.tensors = [{levels = ["dense"], mode_order = [0], name = "A", role = "input", shape = [4]}]} {
    %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
    // expected-error @+1 {{unknown level format 'sparse'}}
    %1:2 = "sam.scan"(%0) {dim = 4 : i64, format = "sparse", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  }
}
