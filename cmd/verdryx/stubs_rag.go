package main

import (
	"context"
	"errors"
	"io"
)

// Owned by the RAG work (issue 4): replace this file.

func cmdIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("index: not implemented yet")
}

func cmdAsk(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("ask: not implemented yet")
}

func benchIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench index: not implemented yet")
}

func cmdMutate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("mutate: not implemented yet")
}
