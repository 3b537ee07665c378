// The failing situations of tests/errors-test.sh through the Go binding:
// one line per situation, "SITUATION ERROR CODE FAILED_LINE ERRNO", ERROR the
// first of the package's sentinels the error matches.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"libreserve/reserve"
)

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrAuthentication", reserve.ErrAuthentication},
	{"ErrOutOfStock", reserve.ErrOutOfStock}, {"ErrNotFound", reserve.ErrNotFound},
	{"ErrExpired", reserve.ErrExpired}, {"ErrClaimed", reserve.ErrClaimed},
	{"ErrReleased", reserve.ErrReleased}, {"ErrBusy", reserve.ErrBusy},
	{"ErrInDoubt", reserve.ErrInDoubt}, {"ErrConn", reserve.ErrConn},
	{"ErrInvalid", reserve.ErrInvalid}, {"ErrQuantity", reserve.ErrQuantity},
	{"ErrToken", reserve.ErrToken}, {"ErrNoItem", reserve.ErrNoItem},
	{"ErrNotPrimary", reserve.ErrNotPrimary},
}

func show(situation string, err error) {
	if err == nil {
		fmt.Println(situation, "no-error", 0, "-", "-")
		return
	}
	var e *reserve.Error
	if !errors.As(err, &e) {
		fmt.Println(situation, "not-a-reserve.Error", 0, "-", "-")
		return
	}
	name := "unknown"
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			name = s.name
			break
		}
	}
	line := "-"
	if e.Line >= 0 {
		line = strconv.Itoa(e.Line)
	}
	errno := "-"
	if e.Errno != 0 {
		errno = strconv.Itoa(e.Errno)
	}
	fmt.Println(situation, name, int(e.Code), line, errno)
}

func open(dsn string) error {
	c, err := reserve.Open(context.Background(), dsn, nil)
	if err == nil {
		c.Close()
	}
	return err
}

func main() {
	ctx := context.Background()
	shop, _ := strconv.ParseUint(os.Getenv("RSV_SHOP"), 10, 64)
	if len(os.Args) > 1 && os.Args[1] == "readonly" {
		show("not_primary", open(os.Getenv("RSV_DSN")))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "indoubt" {
		budget, _ := strconv.Atoi(os.Getenv("RSV_BUDGET_MS"))
		c, err := reserve.Open(ctx, os.Getenv("RSV_DSN_INDOUBT"),
			&reserve.Options{CallTimeout: time.Duration(budget) * time.Millisecond})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer c.Close()
		show("in_doubt", c.ReserveOne(ctx, shop, "go-indoubt", 1, 1, 1, 0))
		return
	}
	show("wrong_password", open(os.Getenv("RSV_DSN_BADPW")))
	show("no_server", open(os.Getenv("RSV_DSN_GONE")))
	c, err := reserve.Open(ctx, os.Getenv("RSV_DSN"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	must(c.StockSet(ctx, shop, 1, 1, 3))
	show("out_of_stock", c.ReserveOne(ctx, shop, "go-oos", 1, 1, 5, 0))
	must(c.ReserveOne(ctx, shop, "go-claimed", 1, 1, 1, 0))
	must(c.Claim(ctx, shop, "go-claimed"))
	show("already_claimed", c.Claim(ctx, shop, "go-claimed"))
	must(c.ReserveOne(ctx, shop, "go-expired", 1, 1, 1, time.Millisecond))
	time.Sleep(50 * time.Millisecond) // past its deadline; the sweep gives the units back
	_, err = c.Sweep(ctx, shop, 0)
	must(err)
	show("expired", c.Claim(ctx, shop, "go-expired"))
	show("bad_token", c.ReserveOne(ctx, shop, "", 1, 1, 1, 0))
}
