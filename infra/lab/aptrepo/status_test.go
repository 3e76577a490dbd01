package aptrepo

import "testing"

func TestForget(t *testing.T) {
	status := "Package: bash\nStatus: install ok installed\nVersion: 5.2-1\n\n" +
		"Package: kubectl\nStatus: install ok installed\nVersion: 1:528.0.0-0\nDescription: gcloud's\n multi-line\n\n" +
		"Package: kubectl-convert\nStatus: install ok installed\n\n" +
		"Package: zsh\nStatus: install ok installed\n"
	got := string(Forget([]byte(status), Names...))
	want := "Package: bash\nStatus: install ok installed\nVersion: 5.2-1\n\n" +
		"Package: kubectl-convert\nStatus: install ok installed\n\n" +
		"Package: zsh\nStatus: install ok installed\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := string(Forget([]byte(status))); got != status {
		t.Error("forgetting nothing changed the database")
	}
}
