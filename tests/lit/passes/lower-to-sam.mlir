// RUN: fuseflow-opt %s --split-input-file --pass-pipeline='builtin.module(lower-to-sam)' | filecheck %s
// One linalg op per region: each kernel kind's sam graph.

// SpMV x(i) = sum_j B(i,j) c(j), B DCSR, c compressed: scan both, repeat c's root along i,
// intersect on j, multiply, reduce.
// CHECK-LABEL: "sam.graph"
// CHECK: %[[RB:.*]] = "sam.root"() {tensor = "B"}
// CHECK: %[[RC:.*]] = "sam.root"() {tensor = "c"}
// CHECK: %[[BI:.*]]:2 = "sam.scan"(%[[RB]]) {{.*}}format = "compressed", index_var = "i"
// CHECK: %[[SIG:.*]] = "sam.repsiggen"(%[[BI]]#1)
// CHECK: %[[REP:.*]] = "sam.repeat"(%[[RC]], %[[SIG]]) {index_var = "i", tensor = "c"}
// CHECK: %[[BJ:.*]]:2 = "sam.scan"(%[[BI]]#0) {{.*}}index_var = "j"
// CHECK: %[[CJ:.*]]:2 = "sam.scan"(%[[REP]]) {{.*}}index_var = "j"
// CHECK: %[[X:.*]]:3 = "sam.intersect"(%[[BJ]]#1, %[[CJ]]#1, %[[BJ]]#0, %[[CJ]]#0)
// CHECK: %[[LB:.*]] = "sam.load"(%[[X]]#1) {tensor = "B"}
// CHECK: %[[LC:.*]] = "sam.load"(%[[X]]#2) {tensor = "c"}
// CHECK: %[[M:.*]] = "sam.alu"(%[[LB]], %[[LC]]) {op = "mul"
// CHECK: %[[R:.*]] = "sam.reduce"(%[[M]], %[[BI]]#1) {index_var = "j", kind = "sum"
// CHECK: "sam.write_crd"(%[[BI]]#1) {format = "compressed", level = 0 : i64
// CHECK: "sam.write_val"(%[[R]]) {tensor = "x"}
// CHECK: sym_name = "r0_generic"
#dcsr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : compressed, d1 : compressed)}>
#sv = #sparse_tensor.encoding<{map = (d0) -> (d0 : compressed)}>
func.func @main(%B: tensor<4x4xf32, #dcsr> {fuseflow.name = "B"}, %c: tensor<4xf32, #sv> {fuseflow.name = "c"}) -> (tensor<4xf32> {fuseflow.name = "x"}) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%B, %c : tensor<4x4xf32, #dcsr>, tensor<4xf32, #sv>) outs(%f : tensor<4xf32>) {
  ^bb0(%b: f32, %v: f32, %acc: f32):
    %m = arith.mulf %b, %v : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Gustavson SpMM X(i,j) = sum_k A(i,k) B(k,j), A CSR, B dense (output variables are named
// first): B's k level is located at A's coordinates, A's ref is repeated along j, and the
// reduction over the outer k is a spacc.
// CHECK-LABEL: "sam.graph"
// CHECK: %[[AI:.*]]:2 = "sam.scan"({{.*}}) {{.*}}format = "dense", index_var = "i", {{.*}}tensor = "A"
// CHECK: %[[AJ:.*]]:2 = "sam.scan"(%[[AI]]#0) {{.*}}format = "compressed", index_var = "k"
// CHECK: %[[BJ:.*]] = "sam.locate"(%[[AJ]]#1, {{.*}}) {dim = 5 : i64, index_var = "k", {{.*}}tensor = "B"}
// CHECK: %[[BK:.*]]:2 = "sam.scan"(%[[BJ]]) {{.*}}format = "dense", index_var = "j"
// CHECK: "sam.repeat"(%[[AJ]]#0, {{.*}}) {index_var = "j", tensor = "A"}
// CHECK: %[[ACC:.*]]:2 = "sam.spacc"(%[[BK]]#1, %[[AJ]]#1, {{.*}}) {index_var = "k", kind = "sum", {{.*}}order = 1
// CHECK: "sam.write_crd"(%[[AI]]#1)
// CHECK: "sam.write_crd"(%[[ACC]]#0, %[[AI]]#1)
// CHECK: "sam.write_val"(%[[ACC]]#1)
// CHECK: sym_name = "r0_matmul"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x3xf32> {fuseflow.name = "B"}) -> (tensor<4x3xf32> {fuseflow.name = "X"}) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// SpGEMM with both operands DCSR: nothing is located, k co-iterates by intersection.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.intersect"({{.*}}) {index_var = "k"
// CHECK: "sam.spacc"
// CHECK: sym_name = "r0_matmul"
#dcsr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : compressed, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #dcsr> {fuseflow.name = "A"}, %B: tensor<5x3xf32, #dcsr> {fuseflow.name = "B"}) -> (tensor<4x3xf32> {fuseflow.name = "X"}) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%A, %B : tensor<4x5xf32, #dcsr>, tensor<5x3xf32, #dcsr>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Elementwise add of two CSR matrices is a union at the compressed level; ReLU is an ALU.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.union"({{.*}}) {index_var = "j"
// CHECK: "sam.alu"({{.*}}) {op = "add"
// CHECK: "sam.write_crd"({{.*}}) {format = "compressed", level = 1
// CHECK: sym_name = "r0_generic"
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.alu"({{.*}}) {op = "relu"
// CHECK: sym_name = "r1_generic"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<4x5xf32, #csr> {fuseflow.name = "B"}) -> (tensor<4x5xf32> {fuseflow.name = "Y"}) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%A, %B : tensor<4x5xf32, #csr>, tensor<4x5xf32, #csr>) outs(%e : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x5xf32>) outs(%e : tensor<4x5xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.cmpf ugt, %a, %cst : f32
    %r = arith.select %c, %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<4x5xf32>
  return %1 : tensor<4x5xf32>
}

// -----

// Elementwise multiply intersects; a scalar scale is an ALU with the scalar attribute.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.intersect"({{.*}}) {index_var = "j"
// CHECK: %[[M:.*]] = "sam.alu"({{.*}}, {{.*}}) {op = "mul"
// CHECK: "sam.alu"(%[[M]]) {op = "mul", {{.*}}scalar = 2.5
// CHECK: sym_name = "r0_generic"
#dcsr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : compressed, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #dcsr> {fuseflow.name = "A"}, %B: tensor<4x5xf32, #dcsr> {fuseflow.name = "B"}) -> (tensor<4x5xf32> {fuseflow.name = "Y"}) {
  %k = arith.constant 2.5 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%A, %B : tensor<4x5xf32, #dcsr>, tensor<4x5xf32, #dcsr>) outs(%e : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.mulf %m, %k : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Bias broadcast: b lacks i, so b's root is repeated along i; the add iterates i over its full
// range even though M is DCSR (a union with a dense range generator), j as a union with b.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.union"({{.*}}) {index_var = "i"
// CHECK: "sam.repeat"({{.*}}) {index_var = "i", tensor = "b"}
// CHECK: "sam.union"({{.*}}) {index_var = "j"
// CHECK: "sam.write_crd"({{.*}}) {format = "dense", level = 0
// CHECK: sym_name = "r0_generic"
#dcsr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : compressed, d1 : compressed)}>
func.func @main(%M: tensor<4x5xf32, #dcsr> {fuseflow.name = "M"}, %b: tensor<5xf32> {fuseflow.name = "b"}) -> (tensor<4x5xf32> {fuseflow.name = "Y"}) {
  %e = tensor.empty() : tensor<4x5xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%M, %b : tensor<4x5xf32, #dcsr>, tensor<5xf32>) outs(%e : tensor<4x5xf32>) {
  ^bb0(%m: f32, %v: f32, %o: f32):
    %s = arith.addf %m, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Row max of a CSC matrix: the output is x(i) but CSC stores (j, i),
// the reduced j is stored outermost, so j comes first and the reduction needs a spacc.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.scan"({{.*}}) {{.*}}index_var = "j"
// CHECK: "sam.scan"({{.*}}) {{.*}}index_var = "i"
// CHECK: "sam.spacc"({{.*}}) {index_var = "j", kind = "max"
// CHECK: sym_name = "r0_generic"
#csc = #sparse_tensor.encoding<{map = (d0, d1) -> (d1 : dense, d0 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csc> {fuseflow.name = "A"}) -> (tensor<4xf32> {fuseflow.name = "x"}) {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%A : tensor<4x5xf32, #csc>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %a, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
