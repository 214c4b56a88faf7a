// Package junit writes a graded run as JUnit XML (eval --junit): one
// testcase per eval case, failures with their failed checks, unmeasured
// cases skipped with their reason.
package junit
