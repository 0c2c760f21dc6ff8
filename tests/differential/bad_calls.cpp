// Bad calls, by family: each sets Builder::why (the key tools/differential.py looks up when
// PyTorch accepts the call) and adds the node that kiln must refuse.
#include "tests/differential/builder.h"

namespace kiln::differential {

namespace {

using ErrorCase = Family;

DType other_float(DType d) { return d == DType::f64 ? DType::f32 : DType::f64; }

std::vector<ErrorCase> binary_errors(const std::string& op) {
  return {
      [op](Builder& b) {
        b.why = "shapes_do_not_broadcast";
        b.node({{"op", op}, {"args", {b.input({2, 3}), b.input({4})}}});
      },
      [op](Builder& b) {
        b.why = "mixed_dtypes";
        b.node({{"op", op},
                {"args",
                 {b.input({3}), b.input({3}, Domain::nonzero, true, false,
                                        other_float(compute_dtype(b.dtype)))}}});
      },
      [op](Builder& b) {
        b.why = "int64_arithmetic";
        b.node({{"op", op}, {"args", {b.ids({3}, 1, 3), b.ids({3}, 1, 3)}}});
      },
  };
}

ErrorCase int64_input(const std::string& op, json params = json::object()) {
  return [op, params](Builder& b) {
    b.why = "int64_input";
    json n = {{"op", op}, {"args", {b.ids({2, 3}, 0, 3)}}};
    n.update(params);
    b.node(n);
  };
}

ErrorCase view_error(const std::string& why, const Shape& shape, const json& view,
                     bool transposed = false) {
  return [=](Builder& b) {
    b.why = why;
    Shape base = shape;
    if (transposed) std::swap(base[0], base[1]);
    std::string x = b.input(base, Domain::any, true, true);
    if (transposed) {
      b.node({{"op", "transpose"}, {"args", {x}}, {"view", {"transpose", 0, 1}}});
      x = b.last;
    }
    b.node({{"op", view.at(0)}, {"args", {x}}, {"view", view}});
  };
}

}  // namespace

const std::map<std::string, std::vector<Family>>& error_cases() {
  static const std::map<std::string, std::vector<Family>> table = [] {
    std::map<std::string, std::vector<Family>> t;
    for (const char* op : {"add", "sub", "mul", "div"}) {
      t[op] = binary_errors(op);
      t[op].push_back(int64_input(std::string(op) + "_scalar", {{"scalar", 2.0}}));
    }
    t["compare"] = {[](Builder& b) {
      b.why = "shapes_do_not_broadcast";
      b.node({{"op", "lt"}, {"args", {b.input({2, 3}), b.input({2})}}});
    }};
    for (const char* op : {"neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu"})
      t[op] = {int64_input(op)};
    t["rsub"] = {int64_input("rsub", {{"scalar", 2.0}})};
    t["rdiv"] = {int64_input("rdiv", {{"scalar", 2.0}})};
    t["pow"] = {int64_input("pow", {{"exponent", 2.0}})};
    t["gelu"] = {int64_input("gelu", {{"approximate", "none"}})};
    for (const char* op : {"sum", "mean"}) {
      t[op] = {
          [op](Builder& b) {
            b.why = "dim_out_of_range";
            b.node({{"op", op}, {"args", {b.input({2, 3})}}, {"dims", {2}}, {"keepdim", false}});
          },
          [op](Builder& b) {
            b.why = "repeated_dim";
            b.node(
                {{"op", op}, {"args", {b.input({2, 3})}}, {"dims", {1, -1}}, {"keepdim", false}});
          },
          int64_input(op, {{"dims", json::array()}, {"keepdim", false}}),
      };
    }
    t["mean"].push_back([](Builder& b) {
      b.why = "mean_of_no_elements";
      b.node({{"op", "mean"}, {"args", {b.input({2, 0})}}, {"dims", {1}}, {"keepdim", false}});
    });
    t["max"] = {
        [](Builder& b) {
          b.why = "dim_out_of_range";
          b.node({{"op", "max"}, {"args", {b.input({2, 3})}}, {"dim", 2}, {"keepdim", false}});
        },
        [](Builder& b) {
          b.why = "zero_dim_input";
          b.node({{"op", "max"}, {"args", {b.input({})}}, {"dim", 0}, {"keepdim", false}});
        },
        [](Builder& b) {
          b.why = "max_of_no_elements";
          b.node({{"op", "max"}, {"args", {b.input({3, 0})}}, {"dim", 1}, {"keepdim", false}});
        },
        int64_input("max", {{"dim", 0}, {"keepdim", false}}),
    };
    t["sum_to"] = {[](Builder& b) {
      b.why = "cannot_reduce";
      b.node({{"op", "sum_to"}, {"args", {b.input({2, 3})}}, {"shape", {4, 2, 2}}});
    }};
    t["matmul"] = {
        [](Builder& b) {
          b.why = "inner_dims_differ";
          b.node({{"op", "matmul"}, {"args", {b.input({2, 3}), b.input({4, 5})}}});
        },
        [](Builder& b) {
          b.why = "batch_dims_do_not_broadcast";
          b.node({{"op", "matmul"}, {"args", {b.input({2, 2, 3}), b.input({3, 3, 4})}}});
        },
        [](Builder& b) {
          b.why = "zero_dim_operand";
          b.node({{"op", "matmul"}, {"args", {b.input({}), b.input({3})}}});
        },
        [](Builder& b) {
          b.why = "mixed_dtypes";
          b.node({{"op", "matmul"},
                  {"args",
                   {b.input({2, 3}), b.input({3, 2}, Domain::any, true, false,
                                             other_float(compute_dtype(b.dtype)))}}});
        },
    };
    t["linear"] = {
        [](Builder& b) {
          b.why = "inner_dims_differ";
          b.node({{"op", "linear"}, {"args", {b.input({2, 3}), b.input({4, 2})}}});
        },
        [](Builder& b) {
          b.why = "bias_wrong_size";
          b.node({{"op", "linear"},
                  {"args",
                   {b.input({2, 3}), b.input({4, 3}),
                    b.input({3}, Domain::any, true, false, compute_dtype(b.dtype))}}});
        },
        [](Builder& b) {
          b.why = "linear_input_not_2d";
          b.node({{"op", "linear"}, {"args", {b.input({2, 2, 3}), b.input({4, 3})}}});
        },
    };
    t["view"] = {view_error("impossible_shape", {2, 6}, {"view", {5, -1}}),
                 view_error("incompatible_strides", {2, 6}, {"view", {-1}}, true)};
    t["reshape"] = {view_error("wrong_count", {2, 6}, {"reshape", {5}})};
    t["transpose"] = {view_error("dim_out_of_range", {2, 3}, {"transpose", 0, 3})};
    t["permute"] = {view_error("repeated_dim", {2, 3}, {"permute", {1, 1}}),
                    view_error("wrong_count", {2, 3}, {"permute", {0}})};
    t["narrow"] = {view_error("out_of_range", {3, 4}, {"narrow", 1, 3, 2})};
    t["slice"] = {view_error("zero_step", {3, 4}, {"slice", 1, 0, 4, 0})};
    t["select"] = {view_error("index_out_of_range", {3, 4}, {"select", 0, 3})};
    t["expand"] = {view_error("non_singleton", {3, 2}, {"expand", {3, 4}}),
                   view_error("fewer_dims", {3, 2}, {"expand", {2}})};
    t["squeeze"] = {view_error("dim_out_of_range", {3, 1}, {"squeeze", 2})};
    t["unsqueeze"] = {view_error("dim_out_of_range", {3, 1}, {"unsqueeze", 3})};
    t["clone"] = {};
    for (const char* op : {"softmax", "log_softmax"}) {
      t[op] = {
          [op](Builder& b) {
            b.why = "dim_out_of_range";
            b.node({{"op", op}, {"args", {b.input({2, 3})}}, {"dim", 2}});
          },
          int64_input(op, {{"dim", -1}}),
      };
    }
    t["softmax"].push_back([](Builder& b) {
      b.why = "zero_dim_input";
      b.node({{"op", "softmax"}, {"args", {b.input({})}}, {"dim", -1}});
    });
    t["causal_softmax"] = {
        [](Builder& b) {
          b.why = "scores_not_2d";
          b.node({{"op", "causal_softmax"}, {"args", {b.input({4})}}, {"offset", 0}});
        },
        [](Builder& b) {
          b.why = "fewer_keys_than_queries";
          b.node({{"op", "causal_softmax"}, {"args", {b.input({4, 3})}}, {"offset", 0}});
        },
        [](Builder& b) {
          b.why = "offset_past_the_keys";
          b.node({{"op", "causal_softmax"}, {"args", {b.input({2, 4})}}, {"offset", 3}});
        },
    };
    t["layer_norm"] = {
        [](Builder& b) {
          b.why = "gamma_wrong_size";
          b.node({{"op", "layer_norm"},
                  {"args", {b.input({2, 3}), b.input({4}), b.input({3})}},
                  {"eps", 1e-5}});
        },
        [](Builder& b) {
          b.why = "nonpositive_eps";
          b.node({{"op", "layer_norm"},
                  {"args", {b.input({2, 3}), b.input({3}), b.input({3})}},
                  {"eps", 0.0}});
        },
    };
    t["cross_entropy"] = {
        [](Builder& b) {
          b.why = "target_out_of_range";
          b.node({{"op", "cross_entropy"},
                  {"args", {b.input({2, 3}), b.ids_of({2}, {0, 3})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "negative_target";
          b.node({{"op", "cross_entropy"},
                  {"args", {b.input({2, 3}), b.ids_of({2}, {-1, 0})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "every_target_ignored";
          b.node({{"op", "cross_entropy"},
                  {"args", {b.input({2, 3}), b.ids_of({2}, {-100, -100})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "targets_wrong_shape";
          b.node({{"op", "cross_entropy"},
                  {"args", {b.input({2, 3}), b.ids_of({3}, {0, 1, 2})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "float_targets";
          b.node({{"op", "cross_entropy"},
                  {"args", {b.input({2, 3}), b.input({2}, Domain::any, false)}},
                  {"ignore_index", -100}});
        },
    };
    t["linear_cross_entropy"] = {
        [](Builder& b) {
          b.why = "target_out_of_range";
          b.node({{"op", "linear_cross_entropy"},
                  {"args", {b.input({2, 3}), b.input({4, 3}), b.ids_of({2}, {0, 4})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "every_target_ignored";
          b.node({{"op", "linear_cross_entropy"},
                  {"args", {b.input({2, 3}), b.input({4, 3}), b.ids_of({2}, {-100, -100})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "inner_dims_differ";
          b.node({{"op", "linear_cross_entropy"},
                  {"args", {b.input({2, 3}), b.input({4, 2}), b.ids_of({2}, {0, 1})}},
                  {"ignore_index", -100}});
        },
        [](Builder& b) {
          b.why = "targets_wrong_shape";
          b.node({{"op", "linear_cross_entropy"},
                  {"args", {b.input({2, 3}), b.input({4, 3}), b.ids_of({1}, {0})}},
                  {"ignore_index", -100}});
        },
    };
    // A shortlist of 2 and one cluster of 2 words (width 2): V = 4, x (2, 3).
    const auto adaptive = [](Builder& b, const Shape& output, const json& targets) {
      json args = {b.input({2, 3}), b.input({3, 3}), b.input({2, 3}), b.input(output)};
      const bool loss = !targets.is_null();
      if (loss) {
        const auto t = targets.get<std::vector<std::int64_t>>();
        args.push_back(b.ids_of({static_cast<std::int64_t>(t.size())}, t));
      }
      json node = {{"op", loss ? "adaptive_softmax_loss" : "adaptive_log_softmax"}, {"args", args}};
      if (loss) node["ignore_index"] = -100;
      b.node(node);
    };
    t["adaptive_softmax_loss"] = {
        [adaptive](Builder& b) {
          b.why = "target_out_of_range";
          adaptive(b, {2, 2}, {0, 4});
        },
        [adaptive](Builder& b) {
          b.why = "negative_target";
          adaptive(b, {2, 2}, {-1, 0});
        },
        [adaptive](Builder& b) {
          b.why = "every_target_ignored";
          adaptive(b, {2, 2}, {-100, -100});
        },
        [adaptive](Builder& b) {
          b.why = "output_not_matching_projection";
          adaptive(b, {2, 1}, {0, 3});
        },
        [adaptive](Builder& b) {
          b.why = "targets_wrong_shape";
          adaptive(b, {2, 2}, {0});
        },
    };
    t["adaptive_log_softmax"] = {
        [adaptive](Builder& b) {
          b.why = "output_not_matching_projection";
          adaptive(b, {2, 1}, json());
        },
        [](Builder& b) {
          b.why = "head_without_shortlist";
          b.node({{"op", "adaptive_log_softmax"},
                  {"args", {b.input({2, 3}), b.input({1, 3}), b.input({2, 3}), b.input({2, 2})}}});
        },
    };
    t["index_select"] = {
        [](Builder& b) {
          b.why = "id_out_of_range";
          b.node({{"op", "index_select"},
                  {"args", {b.input({3, 2}), b.ids_of({1}, {3})}},
                  {"dim", 0}});
        },
        [](Builder& b) {
          b.why = "ids_not_1d";
          b.node({{"op", "index_select"},
                  {"args", {b.input({3, 2}), b.ids_of({1, 2}, {0, 1})}},
                  {"dim", 0}});
        },
        [](Builder& b) {
          b.why = "float_ids";
          b.node({{"op", "index_select"},
                  {"args", {b.input({3, 2}), b.input({2}, Domain::any, false)}},
                  {"dim", 0}});
        },
    };
    t["embedding"] = {
        [](Builder& b) {
          b.why = "id_out_of_range";
          b.node({{"op", "embedding"}, {"args", {b.input({6, 4}), b.ids_of({2}, {1, 6})}}});
        },
        [](Builder& b) {
          b.why = "negative_id";
          b.node({{"op", "embedding"}, {"args", {b.input({6, 4}), b.ids_of({1}, {-1})}}});
        },
        [](Builder& b) {
          b.why = "table_not_2d";
          b.node({{"op", "embedding"}, {"args", {b.input({6}), b.ids_of({1}, {1})}}});
        },
    };
    t["dropout"] = {
        [](Builder& b) {
          b.why = "dropout_p_one";
          b.node({{"op", "dropout"}, {"args", {b.input({2})}}, {"p", 1.0}, {"seed", 1}});
        },
        [](Builder& b) {
          b.why = "negative_p";
          b.node({{"op", "dropout"}, {"args", {b.input({2})}}, {"p", -0.1}, {"seed", 1}});
        },
        int64_input("dropout", {{"p", 0.5}, {"seed", 1}}),
    };
    t["where"] = {
        [](Builder& b) {
          b.why = "mixed_dtypes";
          b.node({{"op", "where"},
                  {"args",
                   {b.mask({2}, true), b.input({2}),
                    b.input({2}, Domain::any, true, false, other_float(compute_dtype(b.dtype)))}}});
        },
        [](Builder& b) {
          b.why = "shapes_do_not_broadcast";
          b.node({{"op", "where"}, {"args", {b.mask({3}, true), b.input({2}), b.input({2})}}});
        },
    };
    t["masked_fill"] = {[](Builder& b) {
      b.why = "mask_does_not_broadcast";
      b.node(
          {{"op", "masked_fill"}, {"args", {b.input({3, 4}), b.mask({3}, false)}}, {"value", 0.0}});
    }};
    t["cat"] = {
        [](Builder& b) {
          b.why = "other_dims_differ";
          b.node({{"op", "cat"}, {"args", {b.input({2, 3}), b.input({3, 3})}}, {"dim", 1}});
        },
        [](Builder& b) {
          b.why = "mixed_dtypes";
          b.node({{"op", "cat"},
                  {"args",
                   {b.input({2}),
                    b.input({2}, Domain::any, true, false, other_float(compute_dtype(b.dtype)))}},
                  {"dim", 0}});
        },
        [](Builder& b) {
          b.why = "dim_out_of_range";
          b.node({{"op", "cat"}, {"args", {b.input({2}), b.input({2})}}, {"dim", 1}});
        },
    };
    t["split"] = {
        [](Builder& b) {
          b.why = "sizes_do_not_add_up";
          b.node({{"op", "split"},
                  {"args", {b.input({3, 6})}},
                  {"sizes", {1, 2}},
                  {"dim", 1},
                  {"piece", 0}});
        },
        [](Builder& b) {
          b.why = "non_positive_chunk";
          b.node({{"op", "split"},
                  {"args", {b.input({3, 6})}},
                  {"chunk", 0},
                  {"dim", 1},
                  {"piece", 0}});
        },
    };
    const auto attention = [](const Shape& s, std::int64_t heads, std::int64_t kv, double p,
                              const std::string& why) {
      return [=](Builder& b) {
        b.why = why;
        b.node({{"op", "causal_attention"},
                {"args", {b.input(s)}},
                {"heads", heads},
                {"kv_heads", kv},
                {"p", p},
                {"seed", 1}});
      };
    };
    t["causal_attention"] = {attention({1, 2, 15}, 3, 2, 0.0, "kv_heads_not_dividing_heads"),
                             attention({1, 2, 10}, 2, 2, 0.0, "width_not_heads_times_d"),
                             attention({2, 12}, 2, 2, 0.0, "projected_not_3d"),
                             attention({1, 2, 12}, 2, 2, 1.0, "dropout_p_one")};
    const auto heads = [](const Shape& q, const Shape& k, const Shape& v, double p,
                          const std::string& why) {
      return [=](Builder& b) {
        b.why = why;
        b.node({{"op", "causal_attention_heads"},
                {"args", {b.input(q), b.input(k), b.input(v)}},
                {"p", p},
                {"seed", 1}});
      };
    };
    t["causal_attention_heads"] = {
        heads({1, 2, 5, 4}, {1, 2, 4, 4}, {1, 2, 4, 4}, 0.0, "more_queries_than_keys"),
        heads({1, 3, 2, 4}, {1, 2, 2, 4}, {1, 2, 2, 4}, 0.0, "kv_heads_not_dividing_heads"),
        heads({1, 2, 2, 4}, {1, 2, 3, 4}, {1, 2, 2, 4}, 0.0, "k_v_shapes_differ"),
        heads({2, 2, 4}, {1, 2, 2, 4}, {1, 2, 2, 4}, 0.0, "q_not_4d"),
        heads({1, 1, 1, 257}, {1, 1, 1, 257}, {1, 1, 1, 257}, 0.0, "d_head_above_256"),
        heads({1, 2, 2, 4}, {1, 2, 2, 4}, {1, 2, 2, 4}, 1.0, "dropout_p_one"),
    };
    return t;
  }();
  return table;
}

}  // namespace kiln::differential
