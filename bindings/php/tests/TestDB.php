<?php
/*
 * TestDB.php - the tests' database and their SQL through the mariadb
 * client (the package itself needs no PHP database extension).
 */

declare(strict_types=1);

namespace Libreserve\Tests;

final class TestDB
{
    public static string $name = '';
    private static int $nextItem = 1000;

    public static function socket(): string
    {
        $s = getenv('RSV_TEST_SOCKET');
        if (!is_string($s) || $s === '') {
            fwrite(STDERR, "RSV_TEST_SOCKET is not set: run under tools/mariadb.sh run (make php-test)\n");
            exit(2);
        }
        return $s;
    }

    public static function user(): string
    {
        return getenv('RSV_TEST_USER') ?: 'root';
    }

    public static function password(): string
    {
        return (string) getenv('RSV_TEST_PASSWORD');
    }

    public static function dsn(?string $db = null): string
    {
        $auth = rawurlencode(self::user());
        if (self::password() !== '') {
            $auth .= ':' . rawurlencode(self::password());
        }
        return sprintf('mariadb://%s@/%s?socket=%s', $auth, rawurlencode($db ?? self::$name), rawurlencode(self::socket()));
    }

    /** @param list<string> $args */
    private static function command(array $args): array
    {
        return array_merge(['mariadb', '--no-defaults', '--socket=' . self::socket(), '-u' . self::user()], $args);
    }

    /** Runs statements; returns their output, tab-separated, no column names. */
    public static function sql(string $stmts, ?string $db = null, string $stdin = ''): string
    {
        $args = ['-N', '-B'];
        if ($stmts !== '') {
            $args[] = '-e';
            $args[] = $stmts;
        }
        $db ??= self::$name;
        if ($db !== '') {
            $args[] = $db;
        }
        $env = getenv();
        $env['MYSQL_PWD'] = self::password();
        $p = proc_open(self::command($args), [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
        if (!is_resource($p)) {
            throw new \RuntimeException('cannot run the mariadb client');
        }
        fwrite($pipes[0], $stdin);
        fclose($pipes[0]);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        if (proc_close($p) !== 0) {
            throw new \RuntimeException("$stmts: $err");
        }
        return trim($out);
    }

    public static function int(string $query): int
    {
        return (int) self::sql($query);
    }

    /** Connections the server has open, the counting one left out. */
    public static function connections(): int
    {
        return (int) self::sql('SELECT COUNT(*) FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND command <> \'Daemon\'', '');
    }

    public static function schemaFile(): string
    {
        return getenv('RSV_SCHEMA') ?: dirname(__DIR__, 3) . '/sql/schema.sql';
    }

    public static function setUp(): void
    {
        self::$name = 'rsvtest_php_' . getmypid();
        self::sql('CREATE DATABASE `' . self::$name . '`', '');
        self::sql('', self::$name, (string) file_get_contents(self::schemaFile()));
    }

    public static function tearDown(): void
    {
        if (self::$name !== '') {
            self::sql('DROP DATABASE IF EXISTS `' . self::$name . '`', '');
        }
    }

    /** An item id no other test uses. */
    public static function item(): int
    {
        return ++self::$nextItem;
    }
}
