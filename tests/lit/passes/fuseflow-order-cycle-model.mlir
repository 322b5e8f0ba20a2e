// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=auto})' | filecheck %s --check-prefix=AUTO
// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},lower-to-sam)' | filecheck %s --check-prefix=PLAIN

// SDDMM written the PyTorch way, out = B * (C @ D), B CSR 5% dense, C and D dense. The
// lowering's own order (no fuseflow-order) is i,k,j: Gustavson for C @ D over the dense
// 32x64x32 space, B applied afterwards. order=auto lowers the shortlisted orders and ranks them
// with the cycle model (statistics from the recorded density, no data here): the inner
// product i,j,k iterates k only under B's nonzeros (C located per row, D re-laid out
// column-major), ~1/20 of the work.
// AUTO: fuseflow.orders = {full = "i,j,k"}
// PLAIN: "sam.spacc"({{.*}}) {index_var = "k"
#sparse = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%arg0: tensor<32x32xf32, #sparse> {fuseflow.density = 0.05 : f64, fuseflow.name = "B"}, %arg1: tensor<32x64xf32> {fuseflow.name = "C"}, %arg2: tensor<64x32xf32> {fuseflow.name = "D"}) -> (tensor<32x32xf32> {fuseflow.name = "out0"}) {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<32x32xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %2 = linalg.matmul ins(%arg1, %arg2 : tensor<32x64xf32>, tensor<64x32xf32>) outs(%1 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %2 : tensor<32x32xf32, #sparse>, tensor<32x32xf32>) outs(%0 : tensor<32x32xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %4 = arith.mulf %in, %in_0 : f32
    linalg.yield %4 : f32
  } -> tensor<32x32xf32>
  return %3 : tensor<32x32xf32>
}
