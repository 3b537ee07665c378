// Package testdb makes the throwaway databases of the package's tests and
// its examples' tests: one database of the test's own, with the
// libreserve schema, on the server whose socket RSV_TEST_SOCKET names
// (tools/mariadb.sh run starts one), through the mariadb client.
package testdb

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"libreserve/reserve"
)

// DB is a database of one test run.
type DB struct {
	Name string
	DSN  string // for reserve.Open, as the test account
	sock string
}

func client() (string, error) {
	for _, name := range []string{"mariadb", "mysql"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no mariadb client (apt-get install mariadb-client)")
}

func (d *DB) command(args ...string) (*exec.Cmd, error) {
	bin, err := client()
	if err != nil {
		return nil, err
	}
	user := os.Getenv("RSV_TEST_USER")
	if user == "" {
		user = "root"
	}
	cmd := exec.Command(bin, append([]string{"--no-defaults", "--socket=" + d.sock, "-u" + user}, args...)...)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+os.Getenv("RSV_TEST_PASSWORD"))
	return cmd, nil
}

// Schema is the schema file: $RSV_SCHEMA, else the source tree's.
func Schema() string {
	if s := os.Getenv("RSV_SCHEMA"); s != "" {
		return s
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "sql", "schema.sql")
}

// New creates the database rsvtest_go_NAME_PID and loads the schema into
// it.  It refuses a database that already exists.  Without
// RSV_TEST_SOCKET it returns an error saying how to get a server.
func New(name string) (*DB, error) {
	sock := os.Getenv("RSV_TEST_SOCKET")
	if sock == "" {
		return nil, fmt.Errorf("RSV_TEST_SOCKET is not set: run under tools/mariadb.sh run (make go-test)")
	}
	d := &DB{Name: fmt.Sprintf("rsvtest_go_%s_%d", name, os.Getpid()), sock: sock}
	if _, err := d.SQL("", "CREATE DATABASE `"+d.Name+"`"); err != nil {
		return nil, err
	}
	schema, err := os.Open(Schema())
	if err != nil {
		d.Drop()
		return nil, err
	}
	defer schema.Close()
	cmd, err := d.command(d.Name)
	if err != nil {
		d.Drop()
		return nil, err
	}
	cmd.Stdin = schema
	if out, err := cmd.CombinedOutput(); err != nil {
		d.Drop()
		return nil, fmt.Errorf("loading %s: %v: %s", Schema(), err, out)
	}
	u := os.Getenv("RSV_TEST_USER")
	if u == "" {
		u = "root"
	}
	d.DSN = reserve.DSN{User: u, Password: os.Getenv("RSV_TEST_PASSWORD"), Socket: sock, Database: d.Name}.String()
	return d, nil
}

// SQL runs statements in database db ("" for none) and returns their
// output, tab-separated without column names.
func (d *DB) SQL(db string, stmts string) (string, error) {
	args := []string{"-N", "-B", "-e", stmts}
	if db != "" {
		args = append(args, db)
	}
	cmd, err := d.command(args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", stmts, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Query runs statements in the test's database, failing t on an error.
func (d *DB) Query(t testing.TB, stmts string) string {
	t.Helper()
	out, err := d.SQL(d.Name, stmts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Drop removes the database.
func (d *DB) Drop() { _, _ = d.SQL("", "DROP DATABASE IF EXISTS `"+d.Name+"`") }

// Session is a client session of its own, fed statements one at a time,
// for holding locks while a test watches a call wait for them.
type Session struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// Session starts a session on the test's database.
func (d *DB) Session() (*Session, error) {
	cmd, err := d.command("-N", "-B", "--unbuffered", d.Name)
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Session{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// Run sends statements and waits until they have run (a marker they are
// followed by comes back).
func (s *Session) Run(stmts string) error {
	if _, err := fmt.Fprintf(s.in, "%s;\nSELECT 'rsv-session-mark';\n", strings.TrimRight(stmts, "; \n")); err != nil {
		return err
	}
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			return fmt.Errorf("session ended before %q ran: %v", stmts, err)
		}
		if strings.TrimSpace(line) == "rsv-session-mark" {
			return nil
		}
	}
}

// Close ends the session (rolling back what it left open).
func (s *Session) Close() error {
	s.in.Close()
	return s.cmd.Wait()
}
