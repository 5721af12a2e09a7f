// strata: the command-line entry point. Subcommands live in their own files.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: an LLM serving engine (Hugging Face models, paged KV cache, CPU and CUDA)"};
  app.require_subcommand(1);
  int exit_code = 0;
  strata::cli::add_generate_command(app, exit_code);
  strata::cli::add_bench_command(app, exit_code);
  strata::cli::add_tokenize_command(app, exit_code);
  strata::cli::add_serve_command(app, exit_code);
  strata::cli::add_bench_serving_command(app, exit_code);
  strata::cli::add_perplexity_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr,
                 "error: %s\nRun 'strata --help' (or 'strata COMMAND --help') for the flags.\n",
                 e.what());
    return 2;
  }
  return exit_code;
}
