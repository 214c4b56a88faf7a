package store

import (
	"os"
	"path/filepath"
)

// Env is what path resolution reads from the process. Zero fields fall back
// to the real process (os.Getenv, os.UserHomeDir, os.Stat).
type Env struct {
	Getenv    func(string) string
	HomeDir   func() (string, error)
	DirExists func(string) bool
}

// ResolvePath picks the store file, most explicit first:
//
//  1. flagDB (--db) when not empty;
//  2. $VERDRYX_DB when set, honoured even if the file does not exist;
//  3. $TAIPAN_HOME/verdryx.db (TAIPAN_HOME defaults to ~/.taipan), only when
//     that directory already exists;
//  4. <dataDir>/verdryx.db (./verdryx.db when dataDir is "").
//
// It never creates anything.
func ResolvePath(flagDB, dataDir string, env Env) string {
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	home := env.HomeDir
	if home == nil {
		home = os.UserHomeDir
	}
	exists := env.DirExists
	if exists == nil {
		exists = func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.IsDir()
		}
	}
	if flagDB != "" {
		return flagDB
	}
	if v := getenv("VERDRYX_DB"); v != "" {
		return v
	}
	dir := getenv("TAIPAN_HOME")
	if dir == "" {
		if h, err := home(); err == nil && h != "" {
			dir = filepath.Join(h, ".taipan")
		}
	}
	if dir != "" && exists(dir) {
		return filepath.Join(dir, "verdryx.db")
	}
	return filepath.Join(dataDir, "verdryx.db")
}
