# Installs .Pinned (NAME=VERSION each) from apt and holds .Names there,
# so an unattended upgrade never moves them; then enables the unit
# .Enable, when set. .Replaces, the packages .Names conflict with, are
# unheld first: apt removes a conflicting package, but not a held one.
# With a .Repo, its key is fetched into .Repo.Keyring when the keyring is
# missing and no key was uploaded (.Repo.Fetch), and only its sources
# list (.Repo.Sources, uploaded before) is updated.
export DEBIAN_FRONTEND=noninteractive
{{- with .Repo}}{{if .Fetch}}
if [ ! -s {{q .Keyring}} ]; then
	if ! command -v curl >/dev/null || ! command -v gpg >/dev/null; then
		echo "fetching the repository key needs curl and gpg: apt-get install -y curl gnupg" >&2
		exit 1
	fi
	mkdir -p "$(dirname {{q .Keyring}})"
	# Fetched to a file first: in a pipe, sh would not notice curl
	# failing and would keep an empty keyring.
	curl -fsSL {{q .KeyURL}} -o {{q (printf "%s.asc" .Keyring)}}
	gpg --dearmor --yes -o {{q (printf "%s.tmp" .Keyring)}} {{q (printf "%s.asc" .Keyring)}}
	rm -f {{q (printf "%s.asc" .Keyring)}}
	mv {{q (printf "%s.tmp" .Keyring)}} {{q .Keyring}}
fi
{{- end}}{{end}}
{{- with .Replaces}}
apt-mark unhold {{qs .}} >/dev/null 2>&1 || true
{{- end}}
install_pinned() {
	apt-get install -y -q --allow-downgrades --allow-change-held-packages -o Dpkg::Options::=--force-confold {{qs .Pinned}}
}
{{- if .Repo}}
# Only the repository up manages is updated; every other list is kept
# (List-Cleanup=0). A mirror the node cannot reach made each install
# wait a minute on apt's retries, and these packages come from this
# repository alone. Should the install then miss a dependency from the
# system's repositories, they are all updated and the install tried
# again.
apt-get update -q -o Dir::Etc::sourcelist={{q .Repo.Sources}} -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0
if ! install_pinned; then
	apt-get update -q
	install_pinned
fi
{{- else}}
apt-get update -q
install_pinned
{{- end}}
{{template "packages/hold" .}}
{{- with .Enable}}
systemctl enable {{q .}}
{{- end}}
