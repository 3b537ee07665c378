// README.md as a user follows it: its install commands and its program,
// exactly as printed but for the connection string and the path of the
// source tree.

package reserve_test

import (
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// block is the first fenced block of the given language whose text
// contains marker.
func block(t *testing.T, readme, lang, marker string) string {
	t.Helper()
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```\n")
	for _, m := range re.FindAllStringSubmatch(readme, -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("README.md has no %s block with %q", lang, marker)
	return ""
}

func TestReadme(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	program := block(t, readme, "go", "func main()")
	if formatted, err := format.Source([]byte(program)); err != nil || string(formatted) != program {
		t.Fatalf("the README's program is not gofmt-formatted (%v)", err)
	}
	if !strings.Contains(program, `os.Getenv("RSV_DSN")`) {
		t.Fatalf("the README's program does not read RSV_DSN")
	}
	install := block(t, readme, "sh", "go mod init")
	here, _ := os.Getwd()
	tree := filepath.Dir(filepath.Dir(here))
	install = strings.ReplaceAll(install, "/path/to/libreserve", tree)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(script string) string {
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RSV_DSN="+db.DSN)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	out := run(install)
	if !strings.Contains(out, "sold 2 hoodies") {
		t.Fatalf("first run: %s", out)
	}
	if out := run("go run ."); !strings.Contains(out, "checkout-9001 was already claimed") {
		t.Fatalf("second run: %s", out)
	}
}
