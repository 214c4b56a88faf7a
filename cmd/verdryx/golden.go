package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

func newGoldenCmd(g *globals) *cobra.Command {
	return newGroupCmd("golden", "draft golden cases from a corpus's chunks", newGoldenDraftCmd(g))
}

// draftFlags are golden draft's flags.
type draftFlags struct {
	corpus, index, out, evalset, id string
	chunks, sources                 []string
	all, force                      bool
}

func newGoldenDraftCmd(g *globals) *cobra.Command {
	var f draftFlags
	cmd := &cobra.Command{
		Use:   "draft",
		Short: "write a skeleton golden case for each chosen chunk, to be edited into an eval set",
		Long: "Write a skeleton golden case for each chosen chunk of a corpus (--corpus FILE, or the corpus an index\n" +
			"generation recorded: --index active|ID): the chunk as the expected rank-1 and cited chunk, its source,\n" +
			"and its numbers with units as must_contain candidates. Each question is a placeholder opening with\n" +
			golden.DraftMarker + ", which eval refuses until it is replaced. The golden file goes to stdout or -o FILE;\n" +
			"--evalset FILE (with -o) also writes the eval set naming each case and the corpus; with --index, the\n" +
			"corpus the generation recorded is copied beside it (<evalset>.corpus.json), out of the data folder.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&f.corpus, "corpus", "", "corpus JSON file to draft from")
	fs.StringVar(&f.index, "index", "", "draft from the corpus of this index generation of --data: active or a generation id")
	fs.StringArrayVar(&f.chunks, "chunk", nil, "a chunk id to draft a case for (repeatable)")
	fs.StringArrayVar(&f.sources, "source", nil, "draft a case for every chunk whose source is this (repeatable; for a --docs index, the file path)")
	fs.BoolVar(&f.all, "all", false, "draft a case for every chunk that has a source")
	fs.StringVarP(&f.out, "output", "o", "", "write the golden file here instead of stdout")
	fs.StringVar(&f.evalset, "evalset", "", "also write an eval set naming the drafted cases (needs -o)")
	fs.StringVar(&f.id, "id", "", "the eval set's and golden file's id (default: <corpus id>-golden)")
	fs.BoolVar(&f.force, "force", false, "overwrite -o and --evalset files that exist")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.check(); err != nil {
			return err
		}
		c, corpusPath, err := f.loadCorpus(g.data)
		if err != nil {
			return err
		}
		ids, err := f.pick(c, corpusPath, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		cases, err := golden.Draft(c, ids)
		if err != nil {
			return inputError(fmt.Errorf("golden draft: %s: %w", corpusPath, err))
		}
		return f.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.data, c, corpusPath, cases)
	}
	return cmd
}

// check refuses flag combinations that cannot draft anything.
func (f *draftFlags) check() error {
	switch {
	case (f.corpus == "") == (f.index == ""):
		return usageErrorf("golden draft: want one of --corpus FILE and --index active|ID")
	case f.all && (len(f.chunks) > 0 || len(f.sources) > 0):
		return usageErrorf("golden draft: --all drafts every chunk; leave out --chunk and --source")
	case !f.all && len(f.chunks) == 0 && len(f.sources) == 0:
		return usageErrorf("golden draft: choose chunks with --chunk ID, --source PATH or --all")
	case f.evalset != "" && f.out == "":
		return usageErrorf("golden draft: --evalset needs -o FILE, the golden file it names")
	}
	return nil
}

// loadCorpus reads the corpus of --corpus, or the one generation --index
// of the store under data recorded (verified against its manifest; no
// embedder is built and no vector read).
func (f *draftFlags) loadCorpus(data string) (rag.Corpus, string, error) {
	path := f.corpus
	if f.index != "" {
		var err error
		_, path, err = index.NewStore(data, index.StoreOptions{}).Generation(f.index)
		if errors.Is(err, index.ErrNoActive) {
			return rag.Corpus{}, "", inputError(fmt.Errorf("golden draft --index %s: %w; run: verdryx index build --corpus FILE --data %s", f.index, err, data))
		}
		if err != nil {
			return rag.Corpus{}, "", inputError(fmt.Errorf("golden draft --index %s: %w", f.index, err))
		}
	}
	if err := checkNotEmpty(path, "corpus"); err != nil {
		return rag.Corpus{}, "", err
	}
	c, err := rag.LoadCorpus(path)
	if err != nil {
		return rag.Corpus{}, "", inputError(err)
	}
	return c, path, nil
}

// pick returns the chosen chunk ids in corpus order, each once. Every
// --chunk must be in the corpus and every --source must match a chunk;
// --all leaves out the chunks without a source, naming them on stderr.
func (f *draftFlags) pick(c rag.Corpus, corpusPath string, stderr io.Writer) ([]string, error) {
	for _, id := range f.chunks {
		if _, ok := c.Entry(id); !ok {
			return nil, inputError(fmt.Errorf("golden draft --chunk %q: no such chunk in corpus %s", id, corpusPath))
		}
	}
	for _, s := range f.sources {
		if !slices.ContainsFunc(c.Entries, func(e rag.Entry) bool { return c.Source(e) == s }) {
			return nil, inputError(fmt.Errorf("golden draft --source %q: no chunk of corpus %s has that %s (its sources: %s)", s, corpusPath, c.SourceField, someSources(c)))
		}
	}
	var ids, skipped []string
	for _, e := range c.Entries {
		src := c.Source(e)
		switch {
		case f.all && src == "":
			skipped = append(skipped, e.ID)
		case f.all, slices.Contains(f.chunks, e.ID), src != "" && slices.Contains(f.sources, src):
			ids = append(ids, e.ID)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "golden draft: %d chunks without a %s left out: %s\n", len(skipped), c.SourceField, strings.Join(skipped, ", "))
	}
	if len(ids) == 0 {
		return nil, inputError(fmt.Errorf("golden draft: corpus %s has no chunk with a %s", corpusPath, c.SourceField))
	}
	return ids, nil
}

// someSources lists the corpus's distinct sources, the first ten.
func someSources(c rag.Corpus) string {
	var out []string
	for _, e := range c.Entries {
		if s := c.Source(e); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > 10 {
		return strings.Join(out[:10], ", ") + fmt.Sprintf(", and %d more", len(out)-10)
	}
	return strings.Join(out, ", ")
}

// write writes the golden file of cases to stdout or -o and, with
// --evalset, the eval set naming each case, with the golden file and the
// corpus relative to it where they can be: --corpus FILE where the user
// keeps it, a generation's corpus (--index) copied beside the eval set
// (keepCorpus), never a path inside the data folder, which index gc may
// remove. The next step it prints runs as printed: it names --data when
// data is not the default.
func (f *draftFlags) write(stdout, stderr io.Writer, data string, c rag.Corpus, corpusPath string, cases []golden.Case) error {
	id := f.id
	if id == "" {
		id = "golden"
		if c.ID != "" {
			id = c.ID + "-golden"
		}
	}
	var gb bytes.Buffer
	if err := writeJSON(&gb, struct {
		ID    string        `json:"id"`
		Cases []golden.Case `json:"cases"`
	}{id, cases}); err != nil {
		return err
	}
	if f.out == "" {
		_, err := stdout.Write(gb.Bytes())
		return err
	}
	if err := f.create(f.out, gb.Bytes()); err != nil {
		return err
	}
	next := "verdryx eval EVALSET"
	if f.evalset != "" {
		if f.index != "" {
			var err error
			if corpusPath, err = f.keepCorpus(corpusPath); err != nil {
				return err
			}
		}
		set := struct {
			ID     string         `json:"id"`
			Corpus string         `json:"corpus"`
			Cases  []grading.Case `json:"cases"`
		}{ID: id, Corpus: relTo(f.evalset, corpusPath)}
		for _, gc := range cases {
			set.Cases = append(set.Cases, grading.Case{ID: gc.CaseID, Grader: grading.GraderRAG, Golden: relTo(f.evalset, f.out) + "#" + gc.CaseID})
		}
		var sb bytes.Buffer
		if err := writeJSON(&sb, set); err != nil {
			return err
		}
		if err := f.create(f.evalset, sb.Bytes()); err != nil {
			return err
		}
		next = "verdryx eval " + shellQuote(f.evalset)
	}
	if f.index != "" {
		next += " --index " + shellQuote(f.index)
	}
	if data != defaultDataDir() {
		next += " --data " + shellQuote(data)
	}
	fmt.Fprintf(stderr, "golden draft: %d cases in %s; write each question (%s), check must_contain, then: %s\n", len(cases), f.out, golden.DraftMarker, next)
	return nil
}

// keepCorpus copies the corpus file a generation recorded beside the eval
// set, as <evalset without extension>.corpus.json, and returns that path.
// A file there with the same bytes is kept; another is refused unless
// --force (create).
func (f *draftFlags) keepCorpus(recorded string) (string, error) {
	b, err := os.ReadFile(recorded)
	if err != nil {
		return "", inputError(fmt.Errorf("golden draft: %w", err))
	}
	dst := strings.TrimSuffix(f.evalset, filepath.Ext(f.evalset)) + ".corpus.json"
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, b) {
		return dst, nil
	}
	if err := f.create(dst, b); err != nil {
		return "", err
	}
	return dst, nil
}

// shellQuote returns s as one POSIX shell word: unchanged when it holds
// only letters, digits and -_./:=@%+, else single-quoted.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+", r)))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// create writes b to path, refusing a file that exists unless --force.
func (f *draftFlags) create(path string, b []byte) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if f.force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	file, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return usageErrorf("golden draft: %s exists (it may hold edited cases); pass --force to overwrite it", path)
	}
	if err != nil {
		return inputError(fmt.Errorf("golden draft: %w", err))
	}
	if _, err := file.Write(b); err != nil {
		file.Close()
		return fmt.Errorf("golden draft: write %s: %w", path, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("golden draft: write %s: %w", path, err)
	}
	return nil
}

// relTo returns target relative to the directory of file, or target made
// absolute when there is no relative path.
func relTo(file, target string) string {
	absFile, err1 := filepath.Abs(file)
	absTarget, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return target
	}
	if rel, err := filepath.Rel(filepath.Dir(absFile), absTarget); err == nil {
		return filepath.ToSlash(rel)
	}
	return absTarget
}
