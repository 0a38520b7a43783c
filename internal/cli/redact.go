package cli

import (
	"net/url"
	"strings"
)

// Redacted returns target as the commands show it, in their output and
// their errors: a URL with its password replaced by "xxxxx", as net/url's
// URL.Redacted writes it; a directory, or a URL with no password,
// unchanged. A password with a raw '/', '?' or '#' in it, where net/url
// reads no password, is hidden whole too: what stands between the ':'
// after the user's name and the last '@' is taken for one when the URL
// does not parse (redis://u:pa/ss@host:6379/0/jobs,
// whose "port" is not a number), and when it parses with a port and no
// user but a host follows that '@', with a port or a path after it
// (redis://u:12/34@host/0, read as host u, port 12, path /34@host/0).
func Redacted(target string) string {
	u, err := url.Parse(target)
	if err == nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		if u.User != nil || u.Port() == "" {
			return target
		}
	}
	scheme, rest, ok := strings.Cut(target, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return target
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword || (err == nil && !followedByHost(scheme, rest[at+1:])) {
		return target
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// followedByHost reports whether after, the text after an '@' of a URL
// of scheme, starts with a host and then a port or a path, as a URL's
// server does.
func followedByHost(scheme, after string) bool {
	u, err := url.Parse(scheme + "://" + after)
	return err == nil && u.Hostname() != "" && (u.Port() != "" || u.Path != "")
}
