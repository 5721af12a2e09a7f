#pragma once
#include <CLI/CLI.hpp>

namespace strata::cli {

// Each registers its subcommand on `app`; the callback sets `exit_code`.
void add_generate_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_bench_serving_command(CLI::App& app, int& exit_code);
void add_perplexity_command(CLI::App& app, int& exit_code);

}  // namespace strata::cli
