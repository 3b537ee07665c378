// dsn.go owns DSN, which writes the connection strings Open and
// OpenBatcher take.

package reserve

import (
	"sort"
	"strconv"
	"strings"
)

// DSN is a connection string's parts.  String escapes every part, so a
// password may hold any byte:
//
//	reserve.DSN{User: "app", Password: "p@ss", Socket: "/run/mysqld/mysqld.sock", Database: "shop"}.String()
//	// mariadb://app:p%40ss@/shop?socket=%2Frun%2Fmysqld%2Fmysqld.sock
type DSN struct {
	User, Password string
	Host           string // empty with Socket
	Port           int    // 0: the default
	Socket         string // a Unix socket path
	Database       string
	// Params are the other keys: connect_timeout, read_timeout,
	// write_timeout (seconds), ssl, ssl_ca, ssl_capath, ssl_cert,
	// ssl_key, ssl_verify.
	Params map[string]string
}

func (d DSN) String() string {
	var b strings.Builder
	b.WriteString("mariadb://")
	if d.User != "" {
		b.WriteString(escape(d.User))
		if d.Password != "" {
			b.WriteString(":" + escape(d.Password))
		}
		b.WriteString("@")
	}
	b.WriteString(escape(d.Host))
	if d.Port != 0 {
		b.WriteString(":" + strconv.Itoa(d.Port))
	}
	b.WriteString("/" + escape(d.Database))
	var q []string
	if d.Socket != "" {
		q = append(q, "socket="+escape(d.Socket))
	}
	keys := make([]string, 0, len(d.Params))
	for k := range d.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q = append(q, escape(k)+"="+escape(d.Params[k]))
	}
	if len(q) > 0 {
		b.WriteString("?" + strings.Join(q, "&"))
	}
	return b.String()
}

// escape writes every byte but the unreserved ones of RFC 3986 as %XX.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
