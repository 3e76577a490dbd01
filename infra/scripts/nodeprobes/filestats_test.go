package nodeprobes

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// The script runs in a real sh and bash on real files: what it prints is
// what ParseFileStats reads, whatever the names.
func TestFileStatsScript(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	conf := write("a.conf", "x = 1\n", 0o644)
	key := write("it's a key", "secret\n", 0o600)
	slash := write(`back\slash`, "", 0o640)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	paths := []string{missing, conf, sub, key, slash}
	want := map[string]nodefacts.FileStat{
		conf:  {Mode: 0o644, Sha256: sum("x = 1\n")},
		key:   {Mode: 0o600, Sha256: sum("secret\n")},
		slash: {Mode: 0o640, Sha256: sum("")},
	}
	for _, shell := range shells {
		stats := statsOf(t, shell, paths)
		if len(stats) != len(want) {
			t.Errorf("%s: stats %v, want %v (no missing file, no directory)", shell, stats, want)
		}
		for p, w := range want {
			if stats[p] != w {
				t.Errorf("%s: %s: %+v, want %+v", shell, p, stats[p], w)
			}
		}
		if got := statsOf(t, shell, []string{missing, sub}); len(got) != 0 {
			t.Errorf("%s: nothing regular: %v", shell, got)
		}
	}
}

func statsOf(t *testing.T, shell string, paths []string) map[string]nodefacts.FileStat {
	t.Helper()
	out := run(t, shell, FileStats(paths))
	stats, err := nodefacts.ParseFileStats(paths, out)
	if err != nil {
		t.Fatalf("%s: parse: %v\n%s", shell, err, out)
	}
	return stats
}
