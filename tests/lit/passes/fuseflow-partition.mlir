// RUN: fuseflow-opt %s --fuseflow-partition='schedule=op' | filecheck %s --check-prefix=OP
// RUN: fuseflow-opt %s --fuseflow-partition='schedule=full' | filecheck %s --check-prefix=FULL
// RUN: echo '{"rules": [{"match": [{"index": [1]}], "tag": "no-fuse"}, {"name": "rest"}]}' > %t.json
// RUN: fuseflow-opt %s --fuseflow-partition='schedule=%t.json' | filecheck %s --check-prefix=RULES
// Views and initialisers get no region; each compute op does. A schedule file holds rules.

// OP: linalg.fill ins
// OP: linalg.matmul {fuseflow.region = "r0_matmul"}
// OP: linalg.generic {{.*}}fuseflow.region = "r1_generic"
// FULL: linalg.matmul {fuseflow.region = "full"}
// FULL: fuseflow.region = "full"
// RULES: linalg.matmul {fuseflow.region = "rest"}
// RULES: fuseflow.region = "r1_op1"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr>, %B: tensor<5x3xf32>) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}
