package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/provider/openai"
	"github.com/verdryx/verdryx/rag"
)

// Environment variables naming the provider key files.
const (
	envOpenAIKeyFile    = "VERDRYX_OPENAI_KEY_FILE"
	envAnthropicKeyFile = "VERDRYX_ANTHROPIC_KEY_FILE"
	envAnthropicKey     = "ANTHROPIC_API_KEY"
)

// modelFlags are the model flags eval and serve share: the judge, the
// provider roots, the per-call timeout and where the keys come from.
// Models resolve ids the way llm.Models does ("stub", "openai:<id>", an
// Anthropic id).
type modelFlags struct {
	judge, anthropicBase, openaiBase *string
	openaiKeyFile, anthropicKeyFile  *string
	timeout                          *time.Duration
}

// addModelFlags defines --judge, --anthropic-base-url, --openai-base-url,
// --openai-key-file, --anthropic-key-file and --timeout on fs.
func addModelFlags(fs *pflag.FlagSet, timeoutHelp string) *modelFlags {
	return &modelFlags{
		judge:         fs.String("judge", "", "judge for llm_judge cases: stub (labelled lexical stand-in), an Anthropic model id, or openai:<id>; default: the model under evaluation, as the Python verdryx judges (stub for stub)"),
		anthropicBase: fs.String("anthropic-base-url", os.Getenv("ANTHROPIC_BASE_URL"), "Anthropic API root, e.g. a proxy ($ANTHROPIC_BASE_URL)"),
		openaiBase: fs.String("openai-base-url", envFirst("", "VERDRYX_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
			"OpenAI-compatible API root (default $VERDRYX_OPENAI_BASE_URL, $OPENAI_BASE_URL, else https://api.openai.com/v1)"),
		openaiKeyFile: fs.String("openai-key-file", envOr(envOpenAIKeyFile, ""),
			"file holding the OpenAI-compatible API key ($"+envOpenAIKeyFile+"; default: $"+openai.EnvAPIKey+")"),
		anthropicKeyFile: fs.String("anthropic-key-file", envOr(envAnthropicKeyFile, ""),
			"file holding the Anthropic API key ($"+envAnthropicKeyFile+"; default: $"+envAnthropicKey+")"),
		timeout: fs.Duration("timeout", 60*time.Second, timeoutHelp),
	}
}

// check refuses unusable roots and timeouts before anything starts.
func (m *modelFlags) check() error {
	if err := checkURL("--anthropic-base-url ($ANTHROPIC_BASE_URL)", *m.anthropicBase, "http", "https"); err != nil {
		return err
	}
	if err := checkURL("--openai-base-url ($VERDRYX_OPENAI_BASE_URL, $OPENAI_BASE_URL)", *m.openaiBase, "http", "https"); err != nil {
		return err
	}
	if *m.timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	return nil
}

// getenv reads the environment, with the keys of the key files (when
// given) in place of $OPENAI_API_KEY and $ANTHROPIC_API_KEY. An unreadable
// key file is an input error naming its flag; the key is never quoted.
func (m *modelFlags) getenv() (func(string) string, error) {
	keys := map[string]string{}
	for _, f := range []struct{ flag, env, path, key string }{
		{"--openai-key-file", envOpenAIKeyFile, *m.openaiKeyFile, openai.EnvAPIKey},
		{"--anthropic-key-file", envAnthropicKeyFile, *m.anthropicKeyFile, envAnthropicKey},
	} {
		if f.path == "" {
			continue
		}
		k, err := readKeyFile(f.path)
		if err != nil {
			return nil, inputError(fmt.Errorf("%s ($%s): %w", f.flag, f.env, err))
		}
		keys[f.key] = k
	}
	return func(name string) string {
		if k, ok := keys[name]; ok {
			return k
		}
		return os.Getenv(name)
	}, nil
}

// resolver returns the model registry of the flags (llm.Models) and the
// getenv it reads keys with.
func (m *modelFlags) resolver() (func(id string) (llm.Model, error), func(string) string, error) {
	opts, getenv, err := m.modelsOptions()
	if err != nil {
		return nil, nil, err
	}
	return llm.Models(opts), getenv, nil
}

// modelsOptions returns the registry's options of the flags, every key
// read (from the key files or the environment) into Keys, and the getenv
// the keys were read with.
func (m *modelFlags) modelsOptions() (llm.ModelsOptions, func(string) string, error) {
	getenv, err := m.getenv()
	if err != nil {
		return llm.ModelsOptions{}, nil, err
	}
	keys := map[string]string{}
	for _, name := range []string{openai.EnvAPIKey, envAnthropicKey} {
		if k := getenv(name); k != "" {
			keys[name] = k
		}
	}
	return llm.ModelsOptions{AnthropicBaseURL: *m.anthropicBase, OpenAIBaseURL: *m.openaiBase, Timeout: *m.timeout, Keys: keys}, getenv, nil
}

// maxKeyFile bounds a key file: a key is a line, not a document.
const maxKeyFile = 4 << 10

// readKeyFile reads a provider key: the file's one line, trimmed. Errors
// name the file, never its content.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("%s: more than %d bytes, not a key", path, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("%s: empty", path)
	case strings.ContainsAny(key, " \t\r\n"):
		return "", errors.New(path + ": holds more than one word, not a key")
	}
	return key, nil
}

// storedRAG is the rag-case builder of eval --index ID|active: the
// generation of the data directory, opened with the embedder that built
// it (grading.StoredRAG over rag.OpenStored), reached with the model
// flags' OpenAI-compatible root, key and timeout. It is nil without
// --index; a generation that does not exist or verify is an input error
// before anything is graded.
func storedRAG(data, id string, mf *modelFlags, getenv func(string) string) (func(context.Context, string, llm.Model) (grading.RAGAsker, error), error) {
	if id == "" {
		return nil, nil
	}
	st := index.NewStore(data, index.StoreOptions{})
	if _, _, err := st.Generation(id); err != nil {
		return nil, inputError(fmt.Errorf("--index %s (--data %s): %w", id, data, err))
	}
	p := rag.Providers{OpenAIBaseURL: *mf.openaiBase, OpenAIKey: openai.KeyFromEnv(getenv), Timeout: *mf.timeout}
	return grading.StoredRAG(st, id, p, nil), nil
}

// evalModels are what eval's model flags resolve to.
type evalModels struct {
	resolve func(id string) (llm.Model, error)
	judge   llm.Model
	rag     func(context.Context, string, llm.Model) (grading.RAGAsker, error)
}

// evalModels checks the flags (check) and resolves eval's --model (checked
// only: Execute resolves it again), --judge and --index; a model or judge without its key is an
// input error naming the flag.
func (m *modelFlags) evalModels(model, data, indexGen string) (evalModels, error) {
	if err := m.check(); err != nil {
		return evalModels{}, err
	}
	resolve, getenv, err := m.resolver()
	if err != nil {
		return evalModels{}, err
	}
	if _, err := resolve(model); err != nil {
		return evalModels{}, inputError(fmt.Errorf("--model: %w", err))
	}
	judgeID := *m.judge
	if judgeID == "" {
		judgeID = model
	}
	judge, err := resolve(judgeID)
	if err != nil {
		return evalModels{}, inputError(fmt.Errorf("--judge: %w", err))
	}
	build, err := storedRAG(data, indexGen, m, getenv)
	if err != nil {
		return evalModels{}, err
	}
	return evalModels{resolve: resolve, judge: judge, rag: build}, nil
}
