package outcome

// Untagged is the outcome label of a run that never carried a non-empty
// outcome tag.
const Untagged = "(untagged)"

// Resolved is the outcome tag the effective cost per resolved outcome divides by.
const Resolved = "case_resolved"
