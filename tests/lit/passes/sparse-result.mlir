// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},lower-to-sam)' | filecheck %s
// A result declared sparse (fuseflow.format, what to_sparse() and formats= put on the op) is a
// region boundary even under schedule=full, and its writer drops zeros: val_drop on the
// innermost level, crd_drop for the compressed rows of DCSR. The consumer scans it compressed.

// CHECK-LABEL: "sam.graph"
// CHECK: %[[V:.*]]:2 = "sam.val_drop"
// CHECK: %[[C:.*]]:2 = "sam.crd_drop"({{.*}}, %[[V]]#0)
// CHECK: "sam.write_crd"(%[[C]]#0) {format = "compressed", level = 0
// CHECK: "sam.write_crd"(%[[C]]#1, %[[C]]#0) {format = "compressed", level = 1
// CHECK: "sam.write_val"(%[[V]]#1)
// CHECK: sym_name = "full"
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.scan"({{.*}}) {{{.*}}format = "compressed", index_var = "i"{{.*}}tensor = "t0"
// CHECK: sym_name = "full.1"
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%X: tensor<4x5xf32> {fuseflow.name = "X"}, %B: tensor<5x3xf32> {fuseflow.name = "B"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%X : tensor<4x5xf32>) outs(%e : tensor<4x5xf32>) attrs = {fuseflow.format = "dcsr"} {
  ^bb0(%in: f32, %out: f32):
    %c = arith.cmpf ugt, %in, %cst : f32
    %s = arith.select %c, %in, %cst : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e1 = tensor.empty() : tensor<4x3xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%r, %B : tensor<4x5xf32>, tensor<5x3xf32>) outs(%f1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
