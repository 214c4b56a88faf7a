// Package grading grades a model's outputs against an eval set and tells
// whether quality has slipped against a baseline.
//
// The pieces, in the order a run uses them:
//
//   - LoadEvalSet reads and validates an eval set up front; every error names
//     the file, the case and the field.
//   - A Model (the deterministic Stub, Anthropic Messages or an
//     OpenAI-compatible chat endpoint) produces each case's output; the same
//     interface serves the llm_judge grader.
//   - Graders (exact, regex, outcome_tag, tool_trace, llm_judge, rag, and
//     typed, which asks typryx when Deps.Typed enables it) turn an output
//     into one Score shape in [0, 1] with tokens, cost and per-check
//     reasons. A typed case typryx leaves unanswered is unmeasured, counted
//     apart with typryx's answer id and reason; typryx refusing fails the
//     run (ErrTypedService).
//   - Runner grades a set with bounded concurrency. A case that cannot be
//     graded is counted apart with its reason; a run with no graded case has
//     no mean ("unmeasured"), never 0.
//   - ComputeDrift compares a window of runs with a baseline run: pooled
//     mean, threshold, Welch's t, a seeded bootstrap CI and a paired per-case
//     test.
//   - Execute is the whole "eval request" flow (load, run, save, drift,
//     events, spans) shared by the CLI and the worker.
package grading
