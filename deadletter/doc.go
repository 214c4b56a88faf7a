// Package deadletter administers the dead-letter stream: the pull loop's
// adapter that copies a terminated message there (ForPull), listing dead
// letters (List) and re-driving them to the subject they came from, once
// (Redrive). Publishing itself is producer.DeadLetterPublisher's.
package deadletter
