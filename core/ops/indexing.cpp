#include "core/ops/indexing.h"

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// Errors naming the first id outside [0, limit), with its position.
void check_ids(std::string_view op, const Tensor& ids, std::int64_t limit) {
  const std::int64_t bad =
      backend_of(ids).find_invalid_id({.n = ids.numel(), .table_rows = limit, .op = op},
                                      static_cast<const std::int64_t*>(ids.raw_data()));
  if (bad < 0) return;
  const std::int64_t id = ids.view({-1}).select(0, bad).item<std::int64_t>();
  fail("{}: id {} at position {} is out of range for a table of {} rows", op, id, bad, limit);
}

// Gathers rows of a contiguous (rows, cols) table: out (n, cols).
Tensor gather(const Tensor& table, const Tensor& ids) {
  const std::int64_t cols = table.size(1);
  Tensor out = empty({ids.numel(), cols}, {table.dtype(), table.device()});
  if (ids.numel() > 0 && cols > 0)
    backend_of(table).gather_rows(
        {.dtype = table.dtype(), .n = ids.numel(), .table_rows = table.size(0), .cols = cols},
        table.raw_data(), static_cast<const std::int64_t*>(ids.raw_data()), out.raw_data());
  return out;
}

// Adds grad row i (contiguous (n, cols)) into row ids[i] of table_grad (contiguous (rows, cols)).
void scatter_add_into(const Tensor& table_grad, const Tensor& grad, const Tensor& ids) {
  const std::int64_t cols = grad.size(1);
  if (ids.numel() > 0 && cols > 0)
    backend_of(grad).scatter_add_rows(
        {.dtype = grad.dtype(), .n = ids.numel(), .table_rows = table_grad.size(0), .cols = cols},
        grad.raw_data(), static_cast<const std::int64_t*>(ids.raw_data()), table_grad.raw_data());
}

// d table = zeros with grad row i added into row ids[i].
Tensor scatter_add(const Tensor& grad, const Tensor& ids, std::int64_t rows) {
  check_floating("scatter_add (index_select and embedding backward)", grad);
  Tensor out = zeros({rows, grad.size(1)}, {grad.dtype(), grad.device()});
  scatter_add_into(out, grad, ids);
  return out;
}

// x's entries at the (already checked, contiguous 1-D) ids along dim: a row gather with dim
// moved to the front and the other dims viewed as columns.
Tensor select_along(const Tensor& x, int dim, const Tensor& index) {
  profile::Scope scope(profile::Family::embedding);
  const Tensor front = x.detach().transpose(0, dim).contiguous();
  Shape front_shape = front.shape();
  const std::int64_t rows = front_shape[0];
  const std::int64_t cols = rows == 0 ? 0 : front.numel() / rows;
  front_shape[0] = index.numel();
  Tensor out = gather(front.view({rows, cols}), index).view(front_shape).transpose(0, dim);
  if (dim == 0) {
    // Rows of the gradient add into the rows they came from: in place into the table's gradient
    // when it already has one (the tied embedding), else into zeros.
    record_sparse(
        "index_select", out, {x, index}, {index},
        [rows, cols](const Tensor& g, const Saved& s) {
          const Tensor g_rows = g.contiguous().view({g.size(0), cols});
          Shape grad_shape = g.shape();
          grad_shape[0] = rows;
          return Grads{scatter_add(g_rows, s[0], rows).view(grad_shape), Tensor()};
        },
        [cols](const Tensor& g, const Saved& s, const Tensor& table_grad) {
          scatter_add_into(table_grad.view({table_grad.size(0), cols}),
                           g.contiguous().view({g.size(0), cols}), s[0]);
        });
    return out;
  }
  out = out.contiguous();
  record(
      "index_select", out, {x, index}, {index}, [dim, rows, cols](const Tensor& g, const Saved& s) {
        const Tensor g_front = g.transpose(0, dim).contiguous();
        Shape grad_shape = g_front.shape();
        grad_shape[0] = rows;
        const Tensor g_rows = g_front.view({g_front.size(0), cols});  // cols, not -1: it may be 0
        const Tensor grad = scatter_add(g_rows, s[0], rows).view(grad_shape).transpose(0, dim);
        return Grads{grad.contiguous(), Tensor()};
      });
  return out;
}

}  // namespace

Tensor index_select(const Tensor& x, std::int64_t dim_in, const Tensor& ids) {
  check_operands("index_select", std::array{x}, {.accepts = Accepts::any});
  check_ids_operand("index_select", "ids", ids, x.device());
  KILN_CHECK(ids.dim() == 1, "index_select: ids must be 1-D, got shape {}", ids.shape());
  KILN_CHECK(x.dim() >= 1, "index_select: cannot index a 0-dim tensor");
  const int dim = normalize_dim(dim_in, x.dim(), "index_select");
  const Tensor index = ids.contiguous();
  check_ids("index_select", index, x.size(dim));
  return select_along(x, dim, index);
}

Tensor embedding(const Tensor& table, const Tensor& ids) {
  check_operands("embedding", std::array{table}, {.accepts = Accepts::any});
  check_ids_operand("embedding", "ids", ids, table.device());
  KILN_CHECK(table.dim() == 2, "embedding: table must be 2-D (V, D), got shape {}", table.shape());
  const Tensor flat = ids.contiguous().view({-1});
  check_ids("embedding", flat, table.size(0));
  Shape out_shape = ids.shape();
  out_shape.push_back(table.size(1));
  return select_along(table, 0, flat).view(out_shape);
}

}  // namespace kiln
