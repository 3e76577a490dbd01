package unitfile

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnvFile reads an EnvironmentFile= the way systemd's load_env_file
// does: KEY=VALUE lines, '#' and ';' comments, single quotes literal, double
// quotes with \" \\ \$ \` escapes, backslash-newline continuations, unquoted
// values trimmed. A leading "export " is tolerated. Lines that are not
// assignments are skipped, as systemd skips them.
func ParseEnvFile(data string) []string {
	var out []string
	rs := []rune(data)
	i := 0
	n := len(rs)
	for i < n {
		for i < n && (rs[i] == ' ' || rs[i] == '\t' || rs[i] == '\n' || rs[i] == '\r') {
			i++
		}
		if i >= n {
			break
		}
		if rs[i] == '#' || rs[i] == ';' {
			for i < n && rs[i] != '\n' {
				i++
			}
			continue
		}
		start := i
		for i < n && rs[i] != '=' && rs[i] != '\n' {
			i++
		}
		if i >= n || rs[i] == '\n' {
			continue
		}
		key := strings.TrimSpace(string(rs[start:i]))
		key = strings.TrimSpace(strings.TrimPrefix(key, "export "))
		i++ // '='
		for i < n && (rs[i] == ' ' || rs[i] == '\t') {
			i++
		}
		var val strings.Builder
		trailing := 0 // unquoted trailing whitespace to trim
		for i < n && rs[i] != '\n' {
			switch r := rs[i]; r {
			case '\'':
				i++
				for i < n && rs[i] != '\'' {
					val.WriteRune(rs[i])
					i++
				}
				i++
				trailing = 0
			case '"':
				i++
				for i < n && rs[i] != '"' {
					if rs[i] == '\\' && i+1 < n {
						switch rs[i+1] {
						case '"', '\\', '$', '`':
							i++
						case '\n':
							i += 2
							continue
						}
					}
					val.WriteRune(rs[i])
					i++
				}
				i++
				trailing = 0
			case '\\':
				if i+1 < n {
					if rs[i+1] != '\n' {
						val.WriteRune(rs[i+1])
					}
					i += 2
				} else {
					i++
				}
				trailing = 0
			default:
				val.WriteRune(r)
				if r == ' ' || r == '\t' || r == '\r' {
					trailing++
				} else {
					trailing = 0
				}
				i++
			}
		}
		if envName.MatchString(key) {
			v := val.String()
			out = append(out, key+"="+v[:len(v)-trailing])
		}
	}
	return out
}

// ReadEnvFiles loads the unit's EnvironmentFile= entries in order. A
// missing optional ("-") file is skipped; a missing required one is an
// error, which fails the start as in systemd.
func ReadEnvFiles(p Paths, files []EnvFile) ([]string, error) {
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(p.Path(f.Path))
		if err != nil {
			if f.Optional && os.IsNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("EnvironmentFile=%s: %w", f.Path, err)
		}
		out = append(out, ParseEnvFile(string(data))...)
	}
	return out, nil
}

// EnvMap turns KEY=VALUE entries into a map; later entries win.
func EnvMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// MergeEnv appends assignments, dropping earlier ones for the same key, so
// the result can be handed to a process without duplicate keys.
func MergeEnv(lists ...[]string) []string {
	idx := map[string]int{}
	var out []string
	for _, l := range lists {
		for _, kv := range l {
			k, _, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			if i, seen := idx[k]; seen {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// ExpandArgs performs systemd's variable substitution on command words: a
// word that is exactly $NAME becomes the value split on whitespace (zero or
// more words); ${NAME} anywhere in a word is replaced verbatim, keeping the
// word whole; $$ is a literal dollar. Unset variables are empty.
func ExpandArgs(words []string, env map[string]string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, "$") && envName.MatchString(w[1:]) {
			out = append(out, strings.Fields(env[w[1:]])...)
			continue
		}
		out = append(out, expandBraced(w, env))
	}
	return out
}

func expandBraced(w string, env map[string]string) string {
	if !strings.Contains(w, "$") {
		return w
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] != '$' || i+1 >= len(w) {
			b.WriteByte(w[i])
			continue
		}
		switch w[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(w[i+2:], '}')
			if end < 0 || !envName.MatchString(w[i+2:i+2+end]) {
				b.WriteByte('$')
				continue
			}
			b.WriteString(env[w[i+2:i+2+end]])
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandSpecifiers resolves the % specifiers a service might use; unknown
// ones are left as written.
func expandSpecifiers(s, unit string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	host, _ := os.Hostname()
	short := Short(unit)
	prefix, _, _ := strings.Cut(short, "@")
	repl := map[byte]string{
		'%': "%", 'n': unit, 'N': short, 'p': prefix, 'i': "", 'I': "",
		't': "/run", 'S': "/var/lib", 'C': "/var/cache", 'L': "/var/log",
		'E': "/etc", 'h': "/root", 'u': "root", 'U': "0", 'H': host,
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) {
			if v, ok := repl[s[i+1]]; ok {
				b.WriteString(v)
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
