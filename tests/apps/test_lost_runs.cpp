// Runs that lost their work, or said something untrue, in issue 43's probe: a loss curve that grew
// without bound, a --save folder found read-only after training, a full --metrics disk that threw
// the run away, "ppl inf" with exit 0, and messages that sent the user to the wrong fault. Each
// case failed before its fix.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/backend.h"
#include "core/io/safetensors.h"
#include "core/ops/elementwise.h"
#include "lm/checkpoint.h"
#include "programs.h"
#include "tests/apps/crafted.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

TEST_CASE("a full --metrics disk: the run saves its state, then fails naming --metrics",
          "[examples][hostile]") {
  // Before: exit 1 at the first metrics row, no checkpoint although --save's disk had room.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string save = dir.file("lm.safetensors");
  const RunResult r = run(tiny_train(dir) + " --eval-every 0 --log-every 5 --steps 20 --save " +
                          save + " --metrics /dev/full");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--metrics /dev/full: write failed: No space left on device") &&
                           Contains("training stopped at step 5") &&
                           Contains("saved its state to " + save));
  REQUIRE(std::filesystem::exists(save));
  CHECK(load_safetensors(save).metadata.at("step") == "5");
  // The saved state continues.
  const RunResult on = run(tiny_train(dir) + " --eval-every 0 --steps 8 --resume " + save);
  INFO(on.output);
  CHECK(on.status == 0);
  CHECK_THAT(on.output, Contains("resumed from " + save + " at step 5"));
  // A FIFO nobody reads: refused at start-up, where opening it would wait for a reader.
  const std::string fifo = dir.file("metrics.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const RunResult unread =
      run("timeout -s KILL 30 " + tiny_train(dir) + " --eval-every 0 --steps 2 --metrics " + fifo);
  INFO(unread.output);
  CHECK(unread.status == 1);
  CHECK_THAT(unread.output, Contains("--metrics " + fifo +
                                     ": cannot open it for writing: a FIFO "
                                     "with no reader") &&
                                !Contains("step 1"));
}

TEST_CASE("a --save folder that takes no files is refused before training", "[examples][hostile]") {
  // Before: found by the first save, after the whole run. Root writes anywhere, so as root the
  // programs run as nobody (setpriv), for whom the folder is read-only.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string folder = dir.file("read-only");
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));  // nobody reaches it
  std::filesystem::create_directory(folder);
  REQUIRE(::chmod(folder.c_str(), 0555) == 0);
  const std::string as_user =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  for (const std::string& program :
       {tiny_train(dir) + " --eval-every 0 --steps 2",
        kTrainCustom + " --data " + dir.path().string() + " --steps 2"}) {
    const RunResult r = run(as_user + program + " --save " + folder + "/lm.safetensors");
    INFO(program << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("--save " + folder + "/lm.safetensors: its folder " + folder +
                                  " does not take new files: Permission denied"));
    CHECK_THAT(r.output, !Contains("step 1"));
  }
}

TEST_CASE("a diverged run's loss curve stays small, and its state is saved",
          "[examples][hostile]") {
  // --lr 1000: a validation loss of about 4e8 nats. Before: one grid line per decade of
  // perplexity, 1.9e8 of them: std::bad_alloc under a 4 GB address space, only .best written.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string save = dir.file("lm.safetensors");
  const RunResult r = run("timeout -s KILL 120 " + tiny_train(dir) +
                          " --steps 30 --eval-every 10 --lr 1000 --save " + save);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("no finite perplexity to report") && !Contains("bad_alloc"));
  CHECK_THAT(r.output, !Contains("valid ppl inf") && !Contains("test ppl inf"));
  CHECK(load_safetensors(save).metadata.at("step") == "30");
  CHECK(std::filesystem::file_size(dir.file("lm.curve.svg")) < 16 * 1024);
}

TEST_CASE("a resumed history of 1e308 and -1e308 draws its curve and ends", "[examples][hostile]") {
  // Before: the grid's loop added 1 to -4e307, which never changes it: a hang deaf to SIGTERM,
  // memory rising past 1.8 GB.
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::string crafted = dir.file("extreme.safetensors");
  rewrite_checkpoint(base, crafted, [](Metadata& m, NamedTensors&) {
    set_json_field(m, "history", "train", "[[1, 1e308], [2, -1e308]]");
  });
  const std::string save = dir.file("on.safetensors");
  const RunResult r = run("timeout -s KILL 60 " + kTrainLm + " --data " + dir.path().string() +
                          " --time-budget 0 --steps 4 --resume " + crafted + " --save " + save);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(std::filesystem::file_size(dir.file("on.curve.svg")) < 16 * 1024);
}

TEST_CASE("a perplexity that overflows is an error, never \"ppl inf\" with exit 0",
          "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // train_lm's final lines, without --save (before: "valid ppl inf", exit 0).
  const RunResult train = run(tiny_train(dir) + " --steps 30 --eval-every 10 --lr 1000");
  INFO(train.output);
  CHECK(train.status == 1);
  CHECK_THAT(train.output, Contains("no finite perplexity to report"));
  CHECK_THAT(train.output, !Contains("valid ppl inf") && !Contains("test ppl inf"));
  // eval_ppl on weights whose loss is finite and far above 710 nats: exp overflows.
  const std::string base = train_base_checkpoint(dir);
  const std::string huge = dir.file("huge.safetensors");
  rewrite_checkpoint(base, huge, [](Metadata&, NamedTensors& tensors) {
    for (auto& [name, tensor] : tensors)
      if (name == "embedding.weight") tensor = tensor * 1e4;
  });
  const RunResult eval = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + huge);
  INFO(eval.output);
  CHECK(eval.status == 1);
  CHECK_THAT(eval.output, Contains(huge) && Contains("no usable perplexity"));
  CHECK_THAT(eval.output, !Contains("ppl inf"));
}

TEST_CASE("a failed save says whether a last good state exists", "[examples][hostile]") {
  // Before: "F keeps its last good state" for a file the run never wrote.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string save = dir.file("new.safetensors");
  const RunResult r =
      run(tiny_train(dir) + " --eval-every 0 --steps 10 --lr 1e30 --skip-nonfinite --save " + save);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Contains("nothing was saved to " + save) && !Contains("keeps its last good state"));
  CHECK(!std::filesystem::exists(save));
}

TEST_CASE("train_custom resuming train_lm's checkpoint is told it holds another model",
          "[examples][hostile]") {
  // Before: "not the same corpus", on the very corpus the checkpoint was trained on.
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const RunResult r =
      run(kTrainCustom + " --data " + dir.path().string() + " --steps 4 --resume " + base);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--resume " + base + ": it holds another model than this run's") &&
                           !Contains("not the same corpus"));
}

TEST_CASE("a --data folder behind a symbolic-link loop is named as such, not as missing",
          "[examples][hostile]") {
  // Before: "not found" from train_lm, a raw "filesystem error" from eval_ppl.
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::string loop = dir.file("loop");
  std::filesystem::create_symlink(loop, loop);
  for (const std::string& command : {kTrainLm + " " + kTinyFlags + " --steps 2 --data " + loop,
                                     kEvalPpl + " --checkpoint " + base + " --data " + loop,
                                     kTrainCustom + " --steps 2 --data " + loop}) {
    const RunResult r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output,
               Contains("cannot reach '" + loop + "': Too many levels of symbolic links"));
    CHECK_THAT(r.output, !Contains("not found") && !Contains("filesystem error"));
  }
}

TEST_CASE("a byte-order mark at the start of a corpus file is skipped, with a note",
          "[examples][hostile]") {
  // Before: "\xEF\xBB\xBFthe" became a vocabulary word of its own.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = dir.file("train.txt");
  const std::string text = file_bytes(train);
  dir.write("train.txt", "\xEF\xBB\xBF" + text);
  const std::string save = dir.file("lm.safetensors");
  const RunResult r = run(tiny_train(dir) + " --eval-every 0 --steps 2 --save " + save);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("note: " + dir.path().string() +
                                "/train.txt begins with a UTF-8 byte-order mark, skipped"));
  const lm::Checkpoint ckpt = lm::read_checkpoint(save);
  CHECK(ckpt.vocabulary.find("the").has_value());
  CHECK(!ckpt.vocabulary.find("\xEF\xBB\xBFthe").has_value());
  // The same corpus without the mark gives the same vocabulary.
  dir.write("train.txt", text);
  REQUIRE(run(tiny_train(dir) + " --eval-every 0 --steps 2 --save " + dir.file("plain.safetensors"))
              .status == 0);
  CHECK(lm::read_checkpoint(dir.file("plain.safetensors")).vocabulary.words() ==
        ckpt.vocabulary.words());
  dir.write("valid.txt", "\xEF\xBB\xBF" + file_bytes(dir.file("valid.txt")));
  const RunResult eval = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + save);
  INFO(eval.output);
  CHECK(eval.status == 0);
  CHECK_THAT(eval.output, Contains("valid.txt begins with a UTF-8 byte-order mark, skipped") &&
                              Contains("| 0 words not in the vocabulary"));
}

TEST_CASE("under a 1 GB address space the programs run, or fail naming the limit, never hang",
          "[examples][hostile]") {
#if defined(__SANITIZE_ADDRESS__)
  std::puts("skipped: AddressSanitizer's shadow memory needs more address space than 1 GB");
  return;
#endif
  // Before: with 8 threads, train_lm and eval_ppl looped in OpenBLAS's start-up (blas_memory_alloc
  // retrying a 129 MiB mmap forever), deaf to SIGTERM. ulimit -v sets the child's RLIMIT_AS.
  // A CPU build runs one thread in 1 GB; a CUDA build maps more than 0.8 GB of libraries at start
  // (libcublasLt 0.5 GB, libnccl 0.2 GB), which leaves too little for OpenBLAS's buffers there.
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const bool openblas = cpu_gemm_source().rfind("openblas", 0) == 0;
  const std::string limited = "ulimit -v 1048576; exec timeout -s KILL 60 ";
  const bool cuda_libraries = file_bytes("/proc/self/maps").find("libcublas") != std::string::npos;
  for (const std::string threads : {"1", "2", "8"}) {
    for (const std::string& command :
         {tiny_train(dir) + " --eval-every 0 --steps 3 --threads " + threads,
          kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + base + " --threads " +
              threads}) {
      const RunResult r = run("sh -c '" + limited + command + "'");
      INFO(command << "\n" << r.output);
      const bool names_limit =
          r.output.find("ulimit -v, RLIMIT_AS: 1073741824 bytes") != std::string::npos;
      CHECK((r.status == 0 || (r.status == 1 && names_limit)));
      if (threads == "1" && !cuda_libraries) CHECK(r.status == 0);
      if (threads == "8" && openblas) {
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Contains("OpenBLAS's buffers for 8 threads"));
      }
    }
  }
}

TEST_CASE("a valid split too short for one evaluation batch is refused at start-up",
          "[examples][hostile]") {
  // Found by a probe: such a run trained to its first validation, failed there and saved
  // nothing, even with --save.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  dir.write("valid.txt", "the cat sees the dog .\n");  // 7 tokens; 10 columns need 20
  const std::string save = dir.file("lm.safetensors");
  const RunResult r =
      run(tiny_train(dir) + " --steps 4 --eval-every 2 --log-every 1 --save " + save);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("the valid split has 7 tokens") &&
                           Contains("--eval-batch-size 10") &&
                           Contains("lower --eval-batch-size to 3"));
  CHECK_THAT(r.output, !Contains("step 1"));
  // Three columns fit: the run trains and evaluates.
  const RunResult fewer =
      run(tiny_train(dir) + " --steps 4 --eval-every 2 --eval-batch-size 3 --save " + save);
  INFO(fewer.output);
  CHECK(fewer.status == 0);
  CHECK_THAT(fewer.output, Contains("valid ppl"));
  // One token fills no column at all: no --eval-batch-size helps, so none is suggested.
  dir.write("valid.txt", "\n");
  const RunResult one = run(tiny_train(dir) + " --steps 4 --eval-every 2 --eval-batch-size 1");
  INFO(one.output);
  CHECK(one.status == 1);
  CHECK_THAT(one.output, Contains("the valid split has 1 token, too short to evaluate") &&
                             !Contains("lower --eval-batch-size"));
}
