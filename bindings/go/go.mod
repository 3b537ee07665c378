module libreserve/reserve

go 1.19
