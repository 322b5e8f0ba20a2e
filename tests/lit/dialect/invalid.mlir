// RUN: fuseflow-opt %s --split-input-file --verify-diagnostics
// Each verifier's diagnostic, one case per chunk.

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  // expected-error @+1 {{has unknown level format 'sparse'}}
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "sparse", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

// No singleton scanner exists: a singleton level is refused, never run as compressed.
"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  // expected-error @+1 {{has unknown level format 'singleton'; expected one of dense, compressed}}
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "singleton", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  // expected-error @+1 {{requires a non-negative integer 'level'}}
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = -1 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  // expected-error @+1 {{requires a positive 'dim'}}
  %1 = "sam.locate"(%c, %0) {dim = 0 : i64, index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.crd, !sam.ref) -> !sam.ref
  %c = "sam.repsiggen"(%c) : (!sam.crd) -> !sam.crd
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  // expected-error @+1 {{has 2 coordinate streams but 1 payload streams}}
  %3:2 = "sam.intersect"(%2, %2, %1) {index_var = "i", operandSegmentSizes = array<i32: 2, 1, 0>, resultSegmentSizes = array<i32: 1, 1, 0>} : (!sam.crd, !sam.crd, !sam.ref) -> (!sam.crd, !sam.ref)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  // expected-error @+1 {{has 1 ref and 0 value payloads but 2 and 0 outputs}}
  %3:3 = "sam.union"(%2, %1) {index_var = "i", operandSegmentSizes = array<i32: 1, 1, 0>, resultSegmentSizes = array<i32: 1, 2, 0>} : (!sam.crd, !sam.ref) -> (!sam.crd, !sam.ref, !sam.ref)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1 = "sam.load"(%0) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
  // expected-error @+1 {{has unknown ALU op 'pow'}}
  %2 = "sam.alu"(%1) {op = "pow", operandSegmentSizes = array<i32: 1, 0>, scalar = 2.0 : f32} : (!sam.val<f32>) -> !sam.val<f32>
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1 = "sam.load"(%0) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
  // expected-error @+1 {{'exp' expects 1 value stream, got 2}}
  %2 = "sam.alu"(%1, %1) {op = "exp", operandSegmentSizes = array<i32: 1, 1>, scalar = 0.0 : f32} : (!sam.val<f32>, !sam.val<f32>) -> !sam.val<f32>
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1 = "sam.load"(%0) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
  // expected-error @+1 {{has unknown reduction kind 'prod'}}
  %2 = "sam.reduce"(%1) {index_var = "i", kind = "prod", operandSegmentSizes = array<i32: 1, 0>} : (!sam.val<f32>) -> !sam.val<f32>
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  %3 = "sam.load"(%1) {tensor = "A"} : (!sam.ref) -> !sam.val<f32>
  // expected-error @+1 {{has order 3; only orders 1 and 2 are supported}}
  %4:2 = "sam.spacc"(%2, %2, %3) {index_var = "j", kind = "sum", order = 3 : i64, operandSegmentSizes = array<i32: 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1>} : (!sam.crd, !sam.crd, !sam.val<f32>) -> (!sam.crd, !sam.val<f32>)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64, mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
  // expected-error @+1 {{with factor 3 must have 3 results, got 2}}
  %3:2 = "sam.fork"(%2) {depth = 0 : i64, factor = 3 : i64, index_var = "i", resultSegmentSizes = array<i32: 2>} : (!sam.crd) -> (!sam.crd, !sam.crd)
}) {sym_name = "g", tensors = []} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: expected a dictionary}}
"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
}) {sym_name = "g", tensors = ["A"]} : () -> ()

// -----

"sam.graph"() ({
  %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
  // expected-error @+1 {{result type must match the repeated stream's type}}
  %1 = "sam.repeat"(%0, %s) {index_var = "i", tensor = "c"} : (!sam.ref, !sam.rsig) -> !sam.crd
  %s = "sam.repsiggen"(%c) : (!sam.crd) -> !sam.rsig
  %c = "sam.repsiggen"(%c) : (!sam.crd) -> !sam.crd
}) {sym_name = "g", tensors = []} : () -> ()
