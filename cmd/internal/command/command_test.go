package command

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
)

// An exit code survives wrapping; any other error ends the binary with 1.
func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{Exit(2, errors.New("bad flag")), 2},
		{fmt.Errorf("drill: %w", Exit(3, errors.New("differs"))), 3},
		{errors.New("plain"), 1},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRunReportsWhatMainWould(t *testing.T) {
	root := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println("said")
			return Exit(4, errors.New("refused"))
		}}
	out, errOut, code := Run(root)
	if code != 4 || errOut != "refused" || out != "said\n" {
		t.Errorf("Run: %q %q %d", out, errOut, code)
	}
}
