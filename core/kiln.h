// kiln's core API in one include: tensors, autograd and every op.
#pragma once

#include "core/autograd.h"
#include "core/build_info.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/matmul.h"
#include "core/ops/reduction.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/threads.h"
