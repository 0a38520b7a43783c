package cli

import (
	"net/url"
	"strings"
)

// Redacted returns target as the commands show it, in their output and
// their errors: a URL with its password replaced by "xxxxx", as net/url's
// URL.Redacted writes it; a directory, or a URL with no password,
// unchanged. A URL that does not parse shows no password either: what
// stands between the ':' after the user's name and the last '@' is taken
// for one, so a password with a raw '/', '?', '#' or '@' in it, which
// breaks the URL, is hidden whole.
func Redacted(target string) string {
	if u, err := url.Parse(target); err == nil {
		if _, ok := u.User.Password(); !ok {
			return target
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(target, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return target
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return target
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
