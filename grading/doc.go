// Package grading grades a model's outputs against an eval set: the eval
// set, the runner and the score shape every grader returns.
//
// The pieces, in the order a run uses them:
//
//   - LoadEvalSet reads and validates an eval set up front; every error names
//     the file, the case and the field (fieldError), all problems at once.
//   - Runner grades a set with bounded concurrency: the model under
//     evaluation (a grading/llm Model) answers each case, and the graders
//     turn an output into one Score in [0, 1] with tokens, cost and
//     per-check reasons: exact, regex, outcome_tag, tool_trace and llm_judge
//     from grading/grader, rag against the set's golden cases (golden.Checker),
//     and typed, which asks typryx when Runner.UseTyped enabled it. A case
//     that cannot be graded is counted apart with its reason; a run with no
//     graded case has no mean ("unmeasured"), never 0. A typed case typryx
//     leaves unanswered is unmeasured, counted apart with typryx's answer id
//     and reason; typryx refusing fails the run (ErrTypedService).
//   - Summarize derives a run's figures (RunSummary); EvalRunData is the
//     data of its eval_run envelope and span.
//
// Around it: grading/llm holds the model and judge adapters and prices,
// grading/grader the individual graders, grading/drift the drift check
// against a baseline, grading/evalrun the whole eval-request flow (load,
// run, save, drift, events, spans) shared by the CLI and the worker,
// grading/junit the JUnit report and grading/mutation the RAG mutation
// check.
package grading
