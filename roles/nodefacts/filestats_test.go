package nodefacts

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The script runs in a real sh on real files: what it prints is what
// ParseFileStats reads, whatever the names.
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

	stats := run(t, paths)
	want := map[string]FileStat{
		conf:  {0o644, sum("x = 1\n")},
		key:   {0o600, sum("secret\n")},
		slash: {0o640, sum("")},
	}
	if len(stats) != len(want) {
		t.Errorf("stats %v, want %v (no missing file, no directory)", stats, want)
	}
	for p, w := range want {
		if stats[p] != w {
			t.Errorf("%s: %+v, want %+v", p, stats[p], w)
		}
	}
	if got := run(t, []string{missing, sub}); len(got) != 0 {
		t.Errorf("nothing regular: %v", got)
	}
}

func run(t *testing.T, paths []string) map[string]FileStat {
	t.Helper()
	out, err := exec.Command("sh", "-c", FileStatsScript(paths)).Output()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	stats, err := ParseFileStats(paths, string(out))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, out)
	}
	return stats
}

// Output that does not add up is an error, never files taken for missing.
func TestParseFileStatsRefusesShortOutput(t *testing.T) {
	paths := []string{"/a", "/b"}
	for name, out := range map[string]string{
		"a file gone before stat": "0 1 \n644\n",
		"a checksum cut":          "0 \n644\nabc  /a\n",
		"an index out of range":   "2 \n644\n" + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  /c\n",
		"a mode that is no mode":  "0 \nrw\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  /a\n",
	} {
		if got, err := ParseFileStats(paths, out); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}
