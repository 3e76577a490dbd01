package nodefacts

import "testing"

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
