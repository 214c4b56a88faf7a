package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/docsbench"
)

// newBenchIngestDocsCmd maps the flags of `verdryx bench ingest-docs`
// onto docsbench.Run and prints its figures.
func newBenchIngestDocsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ingest-docs",
		Short: "benchmark index build --docs on generated Markdown",
		Long: "Generate folders of Markdown (--sizes MB each, documents of --file-kb) and measure what index build --docs\n" +
			"does with them: parse+chunk MB/s (a walk over the folder naming it, reading included), the streaming build\n" +
			"(chunk again, embed offline in batches, --procs at once, write, verify), the generation's size on disk\n" +
			"against the folder's, the peak RSS (VmHWM, reset before each size) and, with --asks, cold asks. MB are 10^6 bytes.",
	}
	fs := cmd.Flags()
	sizes := fs.IntSlice("sizes", []int{10, 100}, "folder sizes to generate, in MB")
	fileKB := fs.Int("file-kb", 50, "size of each generated document, in kB")
	dims := fs.Int("dims", 0, "offline embedder dimensions (0: its default, 1024)")
	procs := fs.Int("procs", runtime.GOMAXPROCS(0), "embedding batches in flight at once")
	dir := fs.String("dir", "", "directory for the generated folders and generations, kept (default: a temporary directory, removed after)")
	asks := fs.Int("asks", 0, "cold asks to time per size, each a new `verdryx ask` process, beside grep -rl of one question word (0: none)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("bench ingest-docs: unexpected argument %q", pos[0])
		}
		if *fileKB <= 0 || *procs <= 0 || *dims < 0 || len(*sizes) == 0 {
			return usageErrorf("bench ingest-docs: --sizes, --file-kb and --procs must be positive")
		}
		if *asks < 0 {
			return usageErrorf("bench ingest-docs: --asks must not be negative")
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		opts := docsbench.Options{SizesMB: *sizes, FileKB: *fileKB, Dims: *dims, Procs: *procs, Dir: *dir, Asks: *asks,
			Ask: func(ctx context.Context, data, question string) error {
				out, err := exec.CommandContext(ctx, self, "ask", "--data", data, question).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				return nil
			}}
		if isTerminal(stderr) {
			bar := progressbar.NewOptions(4*len(*sizes), progressbar.OptionSetWriter(stderr), progressbar.OptionClearOnFinish())
			opts.OnStage = func(mb int, stage string) {
				bar.Describe(fmt.Sprintf("%d MB: %s", mb, stage))
				_ = bar.Add(1)
			}
			defer bar.Finish()
		}
		res, err := docsbench.Run(ctx, opts)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		printBenchDocs(stdout, res)
		return nil
	}
	return cmd
}

func printBenchDocs(w io.Writer, res []docsbench.Size) {
	for _, s := range res {
		fmt.Fprintf(w, "%d MB: %d files, %d bytes, %d chunks (%d bytes of chunk text); GOMAXPROCS=%d\n",
			s.SizeMB, s.Files, s.Bytes, s.Chunks, s.ChunkBytes, s.GOMAXPROCS)
		fmt.Fprintf(w, "  parse+chunk      %7.1f MB/s  (%.2fs)\n", s.ParseMBps, s.ParseSeconds)
		fmt.Fprintf(w, "  build            %7.1f MB/s  (%.2fs: chunk, embed offline in %d requests, write, verify; %s)\n", s.BuildMBps, s.BuildSeconds, s.Requests, s.EmbedderModel)
		fmt.Fprintf(w, "  index on disk    %.1f MiB (%.2fx the folder); peak RSS %.1f MiB\n", float64(s.IndexBytes)/(1<<20), s.DiskRatio, s.PeakRSSMiB)
		if s.AskMedianMS > 0 {
			fmt.Fprintf(w, "  cold ask         median %.1f ms; grep -rl %.1f ms; ask/grep %.2fx; open in process %.1f ms\n", s.AskMedianMS, s.GrepMedianMS, s.AskOverGrep, s.OpenMedianMS)
		}
	}
}
