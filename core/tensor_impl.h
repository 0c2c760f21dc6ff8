// TensorImpl: what a Tensor handle points at. Internal to kiln's ops and backends; users work
// with Tensor. Autograd metadata is null unless the tensor takes part in autograd, so plain
// tensors pay nothing for it.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace kiln {

class Node;

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that adds into grad
};

struct TensorImpl {
  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, std::int64_t offset,
             DType dtype);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;        // in elements
  std::int64_t offset;  // in elements
  DType dtype;
  std::unique_ptr<AutogradMeta> autograd;

  AutogradMeta& autograd_meta() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

// A tensor viewing `base`'s storage with other sizes/strides/offset (no autograd).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset);

}  // namespace kiln
