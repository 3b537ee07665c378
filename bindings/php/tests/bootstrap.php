<?php
/*
 * bootstrap.php - the tests' autoloader and database: one database of
 * their own with the libreserve schema on the server RSV_TEST_SOCKET names
 * (tools/mariadb.sh run starts one), made and dropped through the mariadb
 * client.
 */

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    foreach (['Libreserve\\Tests\\' => __DIR__ . '/', 'Libreserve\\' => dirname(__DIR__) . '/src/'] as $prefix => $dir) {
        if (str_starts_with($class, $prefix)) {
            $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});

require __DIR__ . '/TestDB.php';

\Libreserve\Tests\TestDB::setUp();
register_shutdown_function([\Libreserve\Tests\TestDB::class, 'tearDown']);
