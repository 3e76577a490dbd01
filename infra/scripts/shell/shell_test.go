package shell

import (
	"os/exec"
	"testing"
)

// Every value comes back from a real shell as the one word it was: the
// oracle is dash (Debian's /bin/sh) and bash, not a re-implementation.
func TestQuoteIsOneWordInRealShells(t *testing.T) {
	values := []string{"", "plain", "two words", "it's", "''", `a\b`, "$HOME", "`id`", "$(id)", "a\nb", "*", "-n", "x;rm -rf /", "\t", "é"}
	for _, sh := range []string{"/bin/sh", "bash"} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Fatalf("%s: %v", sh, err)
		}
		for _, v := range values {
			got, err := exec.Command(sh, "-c", "set -- "+Quote(v)+`; printf '%s|%s' "$#" "$1"`).Output()
			if err != nil {
				t.Fatalf("%s with %q: %v", sh, v, err)
			}
			if want := "1|" + v; string(got) != want {
				t.Errorf("%s reads %s as %q, want %q", sh, Quote(v), got, want)
			}
		}
	}
}
