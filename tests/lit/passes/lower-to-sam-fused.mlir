// RUN: fuseflow-opt %s --split-input-file --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},lower-to-sam)' | filecheck %s
// RUN: fuseflow-opt %s --split-input-file --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},lower-to-sam)' | filecheck %s --check-prefix=ONEMAX
// Multi-op regions: one sam.graph per function, intermediates streamed.

// SpMM chained into a second SpMM, Y = (A @ B) @ C, both Gustavson: T(i,k) = sum_l A(i,l) B(l,k)
// is accumulated by a spacc over l keyed by k, and its output coordinates drive the root spacc
// over k keyed by j: T is streamed, never stored, never recomputed.
// CHECK-LABEL: "sam.graph"
// CHECK: %[[T:.*]]:2 = "sam.spacc"({{.*}}) {index_var = "l", kind = "sum", {{.*}}order = 1
// CHECK: "sam.spacc"({{.*}}, %[[T]]#0, {{.*}}) {index_var = "k", kind = "sum", {{.*}}order = 1
// CHECK: sym_name = "full"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x6xf32> {fuseflow.name = "B"}, %C: tensor<6x3xf32> {fuseflow.name = "C"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x6xf32>
  %f0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x6xf32>) outs(%f0 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x3xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%t, %C : tensor<4x6xf32>, tensor<6x3xf32>) outs(%f1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// SpMM + bias + ReLU in one graph: the product is accumulated (spacc over k keyed by j), its
// (coordinate, value) streams join the bias with a union at j whose payloads are the bias refs
// and the product's values, and ReLU is the last ALU before the writers.
// CHECK-LABEL: "sam.graph"
// CHECK: %[[ACC:.*]]:2 = "sam.spacc"({{.*}}) {index_var = "k", kind = "sum"
// CHECK: %[[U:.*]]:3 = "sam.union"({{.*}}, %[[ACC]]#0, {{.*}}, %[[ACC]]#1) {index_var = "j"
// CHECK: %[[S:.*]] = "sam.alu"({{.*}}) {op = "add"
// CHECK: %[[R:.*]] = "sam.alu"(%[[S]]) {op = "relu"
// CHECK: "sam.write_val"(%[[R]])
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x3xf32, #csr> {fuseflow.name = "B"}, %b: tensor<3xf32> {fuseflow.name = "b"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x3xf32, #csr>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%m, %b : tensor<4x3xf32>, tensor<3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%x: f32, %v: f32, %o: f32):
    %s = arith.addf %x, %v : f32
    %c = arith.cmpf ugt, %s, %cst : f32
    %r = arith.select %c, %s, %cst : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Masked softmax: select(mask == 0, -inf, s) then softmax. Only the mask's nonzeros are visited
// (the key variable j intersects the mask, no dense range generator), the row max and the row
// sum are hoisted per row and repeated along j. The max appears twice in the index notation
// (for the numerator and inside the denominator's sum, with different bound variables); the
// alpha-equivalent copies are shared, so it is computed once (the second RUN line; no other split has a max).
// ONEMAX: kind = "max"
// ONEMAX-NOT: kind = "max"
// CHECK-LABEL: "sam.graph"
// CHECK-NOT: tensor = ""
// CHECK: "sam.alu"({{.*}}) {op = "mask"
// CHECK: "sam.reduce"({{.*}}) {index_var = "{{.*}}", kind = "max"
// CHECK: "sam.repeat"({{.*}}) {index_var = "j", tensor = ""} : (!sam.val<f32>, !sam.rsig) -> !sam.val<f32>
// CHECK: "sam.alu"({{.*}}) {op = "exp"
// CHECK: "sam.alu"({{.*}}) {op = "div"
// CHECK: sym_name = "full"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%s: tensor<4x6xf32> {fuseflow.name = "s"}, %mask: tensor<4x6xf32, #csr> {fuseflow.name = "mask"}) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eb = tensor.empty() : tensor<4x6xi1>
  %isz = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%mask : tensor<4x6xf32, #csr>) outs(%eb : tensor<4x6xi1>) {
  ^bb0(%m: f32, %o: i1):
    %c = arith.cmpf oeq, %m, %zero : f32
    linalg.yield %c : i1
  } -> tensor<4x6xi1>
  %e = tensor.empty() : tensor<4x6xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%isz, %s : tensor<4x6xi1>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%c: i1, %x: f32, %o: f32):
    %r = arith.select %c, %ninf, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%masked : tensor<4x6xf32>) outs(%fm : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%masked, %mx : tensor<4x6xf32>, tensor<4xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x6xf32>) outs(%fz : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%ex, %sm : tensor<4x6xf32>, tensor<4xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %r = arith.divf %x, %z : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// A twice-used intermediate is recomputed, not materialised: T = A @ B is used twice in
// T * T^T, once per orientation, so its accumulation appears twice (two scanner chains over A,
// variables k and l), and the two value streams meet in an intersect with value payloads. (Two
// uses at the same position, T * T, are one computation: alpha-equivalent sums are shared.)
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.spacc"({{.*}}) {index_var = "{{k|l}}", kind = "sum"
// CHECK: "sam.spacc"({{.*}}) {index_var = "{{k|l}}", kind = "sum"
// CHECK: %[[X:.*]]:3 = "sam.intersect"
// CHECK: "sam.alu"(%[[X]]#1, %[[X]]#2) {op = "mul"
// CHECK: sym_name = "full"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x4xf32> {fuseflow.name = "B"}) -> tensor<4x4xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%t, %t : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %r = arith.mulf %x, %z : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// A sum consumed under an outer loop it does not use, the second layer of a GNN:
// Y(i,j) = sum_k A(i,k) T(k,j) with T(k,j) = sum_l C(k,l) B(l,j). T's row k is regenerated for
// every nonzero A(i,k) (the cost of fusing across the reduction over k), but it is accumulated
// once there by a spacc over l inside (i, k), not recomputed per output j by an inner product.
// CHECK-LABEL: "sam.graph"
// CHECK-NOT: "sam.reduce"
// CHECK: %[[T:.*]]:2 = "sam.spacc"({{.*}}) {index_var = "l", kind = "sum"
// CHECK-NOT: "sam.reduce"
// CHECK: "sam.spacc"(%[[T]]#0, {{.*}}) {index_var = "k", kind = "sum"
// CHECK: sym_name = "full"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %C: tensor<5x6xf32, #csr> {fuseflow.name = "C"}, %B: tensor<6x3xf32> {fuseflow.name = "B"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<5x3xf32>
  %f0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<5x3xf32>) -> tensor<5x3xf32>
  %t = linalg.matmul ins(%C, %B : tensor<5x6xf32, #csr>, tensor<6x3xf32>) outs(%f0 : tensor<5x3xf32>) -> tensor<5x3xf32>
  %e1 = tensor.empty() : tensor<4x3xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%A, %t : tensor<4x5xf32, #csr>, tensor<5x3xf32>) outs(%f1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
