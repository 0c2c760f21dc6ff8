// Untrusted checkpoints (issue 22): a real train_lm checkpoint with one value of its config or
// metadata changed, read as the programs read it. Every one is a kiln::Error naming the file and
// the value (a status in [1, 127] from each program), before any model is built: before the fix,
// sizes near 2^62 ended in SIGSEGV in all four programs, 10^9 layers grew memory until killed,
// d_model 10,000 built a 2.9 GB model before the mismatch showed, and a thread count of 10^8
// crashed OpenMP.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/host_memory.h"
#include "lm/train_state.h"
#include "lm/transformer_checkpoint.h"
#include "programs.h"
#include "tests/apps/crafted.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

struct Crafted {
  std::string what;   // the probe, for the failure message
  std::string entry;  // metadata entry ("config", "data_position", ...), or "" for a plain key
  std::string field;  // JSON field, or the key when entry is ""
  std::string value;  // JSON text, or the value when entry is ""
  std::string named;  // what the error must name
};

std::string craft(const TempDir& dir, const std::string& base, const Crafted& c) {
  const std::string path = dir.file("crafted.safetensors");
  rewrite_checkpoint(base, path, [&](Metadata& m, NamedTensors&) {
    if (c.entry.empty()) {
      m[c.field] = c.value;
    } else {
      set_json_field(m, c.entry, c.field, c.value);
    }
  });
  return path;
}

// Sizes a config may carry, each of which once crashed or ran away (and d_model 16 of a file
// whose tensors have 32).
const std::vector<Crafted> kConfigProbes = {
    {"d_model 2^62", "config", "d_model", "4611686018427387904", "d_model 4611686018427387904"},
    {"d_model 2^31", "config", "d_model", "2147483648", "d_model 2147483648"},
    {"d_model 10000", "config", "d_model", "10000", "'embedding.weight' has shape [25, 32]"},
    {"ff 2^62", "config", "ff", "4611686018427387904", "ff 4611686018427387904"},
    {"ff 2^32", "config", "ff", "4294967296", "'blocks.0.ffn.fc1.weight' has shape [64, 32]"},
    {"max_seq_len 2^62", "config", "max_seq_len", "4611686018427387904",
     "max_seq_len 4611686018427387904"},
    {"max_seq_len 2^53", "config", "max_seq_len", "9007199254740992",
     "max_seq_len 9007199254740992"},
    {"layers 10^9", "config", "layers", "1000000000", "layers 1000000000"},
    {"layers 2^63 - 1", "config", "layers", "9223372036854775807", "layers 9223372036854775807"},
    {"vocab -1", "config", "vocab", "-1", "vocab must be positive, got -1"},
    {"heads 0", "config", "heads", "0", "heads must be positive, got 0"},
    {"kv_heads 2^64 - 1", "config", "kv_heads", "18446744073709551615",
     "'kv_heads' is 18446744073709551615"},
};

}  // namespace

TEST_CASE("a checkpoint's config is checked against its tensors before a model is built",
          "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  for (const Crafted& c : kConfigProbes) {
    INFO(c.what);
    const std::string path = craft(dir, base, c);
    REQUIRE_THROWS_WITH(lm::read_transformer_checkpoint(path), Contains(path) && Contains(c.named));
  }
  // A config that sizes the file's tensors, but whose positional table would not fit in memory.
  const std::string path = craft(dir, base, {"", "config", "max_seq_len", "1099511627776", ""});
  REQUIRE_THROWS_WITH(lm::read_transformer_checkpoint(path),
                      Contains(path) && Contains("max_seq_len 1099511627776") &&
                          Contains("more than this machine's"));
  // The same limit a smaller machine has: the model's own 37 KB fit, 1 MB of table does not.
  const std::string longer = craft(dir, base, {"", "config", "max_seq_len", "8192", ""});
  kiln::testing::set_host_memory_bytes(1 << 20);
  REQUIRE_THROWS_WITH(lm::read_transformer_checkpoint(longer), Contains("max_seq_len 8192"));
  kiln::testing::set_host_memory_bytes(0);
  REQUIRE(lm::read_transformer_checkpoint(longer).config.max_seq_len == 8192);
  REQUIRE_NOTHROW(lm::load_model(lm::read_transformer_checkpoint(base), Device::cpu()));
}

TEST_CASE("every program refuses a crafted checkpoint with a message, never a signal",
          "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::string out = dir.file("maps");
  std::vector<Crafted> probes = kConfigProbes;
  probes.push_back({"threads 10^8", "", "threads", "100000000", "threads"});
  for (const Crafted& c : probes) {
    const std::string path = craft(dir, base, c);
    for (const std::string& command :
         {kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + path,
          kGenerate + " --prompt 'the cat' --tokens 3 --checkpoint " + path,
          kAttentionMaps + " --text 'the cat' --out " + out + " --checkpoint " + path,
          kTrainLm + " --data " + dir.path().string() + " --time-budget 0 --steps 3 --resume " +
              path}) {
      const RunResult r = run(command);
      if (c.field == "threads" &&
          (command.rfind(kGenerate, 0) == 0 || command.rfind(kAttentionMaps, 0) == 0)) {
        CHECK(r.status == 0);  // they do not take a checkpoint's thread count
        continue;
      }
      INFO(c.what << "\n" << command << "\n" << r.output);
      CHECK(r.status >= 1);
      CHECK(r.status <= 127);
      CHECK_THAT(r.output, Contains(path) && Contains(c.named));
    }
  }
}

TEST_CASE("a resumed run's state is checked: position, optimizer, thread count, settings",
          "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::vector<Crafted> probes = {
      {"data position 99999999", "data_position", "index", "99999999", "window 99999999"},
      {"data position -1", "data_position", "index", "-1", "window -1"},
      {"optimizer lion", "optimizer", "name", "\"lion\"", "\"lion\""},
      {"saved --optimizer lion", "train", "optimizer", "\"lion\"", "'lion'"},
      {"threads 10^8", "", "threads", "100000000", "'threads' is 100000000"},
      {"threads 0", "", "threads", "0", "'threads' is 0"},
      {"saved beta2 2", "train", "beta2", "2", "--beta2 2"},
      {"saved lr -1", "train", "lr", "-1", "--lr -1"},
      {"saved eps 0", "train", "eps", "0", "--eps 0"},
      {"saved batch_size 2^64 - 1", "train", "batch_size", "18446744073709551615", "batch_size"},
      {"saved seq_len 1.5", "train", "seq_len", "1.5", "seq_len"},
      {"best step after the step", "history", "best_step", "999", "best step 999"},
      // Integers beyond 32 bits: read as 64 and range-checked (before: 2^32 + 1 was read as 1,
      // 2^62 as 0, 2^31 as -2147483648).
      {"world_size 2^32 + 1", "", "world_size", "4294967297",
       "'world_size' is 4294967297, not an integer in [1, 2147483647]"},
      {"world_size 2^62", "", "world_size", "4611686018427387904",
       "'world_size' is 4611686018427387904"},
      {"world_size 2^31", "", "world_size", "2147483648", "'world_size' is 2147483648"},
      {"threads 2^32 + 1", "", "threads", "4294967297",
       "'threads' is 4294967297, not an integer in [1, 1024]"},
      {"step 2^64 - 1", "", "step", "18446744073709551615", "'step' is 18446744073709551615"},
      {"negative shuffle seed", "data_position", "shuffle_seed", "-1", "shuffle_seed is -1"},
      // An optimizer step beyond the run's (before: a NaN loss and "Lower --lr").
      {"optimizer step 2^63 - 1", "optimizer", "step", "9223372036854775807",
       "'optimizer' field step is 9223372036854775807, not an integer in [0, 2]"},
  };
  for (const Crafted& c : probes) {
    const std::string path = craft(dir, base, c);
    const RunResult r = run(kTrainLm + " --data " + dir.path().string() +
                            " --time-budget 0 --steps 4 --resume " + path);
    INFO(c.what << "\n" << r.output);
    CHECK(r.status >= 1);
    CHECK(r.status <= 127);
    CHECK_THAT(r.output, Contains(path) && Contains(c.named));
  }
  for (const Crafted& c : probes) {
    if (c.what.rfind("optimizer step", 0) != 0) continue;
    const RunResult r = run(kTrainLm + " --data " + dir.path().string() +
                            " --time-budget 0 --steps 4 --resume " + craft(dir, base, c));
    CHECK_THAT(r.output, !Contains("Lower --lr"));
  }
  // The unchanged state resumes.
  const RunResult r = run(kTrainLm + " --data " + dir.path().string() +
                          " --time-budget 0 --steps 4 --resume " + base);
  INFO(r.output);
  CHECK(r.status == 0);
}

TEST_CASE("a config or saved setting that is not usable says why, not something else",
          "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  // d_model 1e400: JSON that parses to no double (before: "not a JSON object").
  const std::string overflow = dir.file("overflow.safetensors");
  rewrite_checkpoint(base, overflow, [](Metadata& m, NamedTensors&) {
    std::string& config = m.at("config");
    const std::size_t at = config.find("\"d_model\":32");
    REQUIRE(at != std::string::npos);
    config.replace(at, 12, "\"d_model\":1e400");
  });
  for (const std::string& command :
       {kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + overflow,
        kTrainLm + " --data " + dir.path().string() + " --steps 3 --resume " + overflow}) {
    const RunResult r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains(overflow) && Contains("config: not valid JSON") &&
                             Contains("1e400") && !Contains("not a JSON object"));
  }
  // A saved window length of -16 (before: "does not record its training window length").
  const std::string negative = dir.file("negative.safetensors");
  rewrite_checkpoint(base, negative, [](Metadata& m, NamedTensors&) {
    set_json_field(m, "train", "seq_len", "-16");
  });
  for (const std::string& command :
       {kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + negative,
        kTrainLm + " --data " + dir.path().string() + " --steps 3 --resume " + negative}) {
    const RunResult r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output,
               Contains("--seq-len -16 (from " + negative + "): expected an integer >= 1") &&
                   !Contains("does not record"));
  }
}
