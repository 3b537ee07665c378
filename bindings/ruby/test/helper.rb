# frozen_string_literal: true

# The tests' database: one of their own, with the libreserve schema, on
# the server whose socket RSV_TEST_SOCKET names (tools/mariadb.sh run
# starts one), made and dropped through the mariadb client.

require "minitest/autorun"
require "open3"
require "libreserve"

module TestDB
  SOCKET = ENV.fetch("RSV_TEST_SOCKET") { abort "RSV_TEST_SOCKET is not set: run under tools/mariadb.sh run (make ruby-test)" }
  USER = ENV.fetch("RSV_TEST_USER", "root")
  PASSWORD = ENV.fetch("RSV_TEST_PASSWORD", "")
  NAME = "rsvtest_ruby_#{Process.pid}"
  SCHEMA = ENV.fetch("RSV_SCHEMA") { File.expand_path("../../../sql/schema.sql", __dir__) }
  CLIENT = %w[mariadb mysql].find { |c| system("command -v #{c} >/dev/null 2>&1") } or abort "no mariadb client"

  module_function

  def command(*args)
    [{ "MYSQL_PWD" => PASSWORD }, CLIENT, "--no-defaults", "--socket=#{SOCKET}", "-u#{USER}", *args]
  end

  # Runs statements; returns their output, tab-separated, no column names.
  def sql(stmts, database: NAME)
    out, status = Open3.capture2e(*command("-N", "-B", "-e", stmts, *database))
    raise "#{stmts}: #{out}" unless status.success?

    out.strip
  end

  def dsn
    Libreserve.dsn(database: NAME, user: USER, password: PASSWORD.empty? ? nil : PASSWORD, socket: SOCKET)
  end

  # A session of its own fed statements one at a time, for holding locks
  # while a test watches a call wait for them.
  class Session
    def initialize
      @io = IO.popen(TestDB.command("-N", "-B", "--unbuffered", NAME), "r+")
    end

    # Sends statements and returns once they have run.
    def run(stmts)
      @io.puts("#{stmts.chomp(';')};\nSELECT 'rsv-session-mark';")
      @io.flush
      loop do
        line = @io.gets or raise "the session ended before #{stmts} ran"
        return if line.strip == "rsv-session-mark"
      end
    end

    def close
      @io.close_write
      @io.read
      @io.close
    end
  end
end

sql_ok = system(*TestDB.command("-e", "CREATE DATABASE `#{TestDB::NAME}`"))
abort "cannot create the test database #{TestDB::NAME} (does it exist already?)" unless sql_ok
Minitest.after_run { TestDB.sql("DROP DATABASE IF EXISTS `#{TestDB::NAME}`", database: nil) }
out, status = Open3.capture2e(*TestDB.command(TestDB::NAME), stdin_data: File.read(TestDB::SCHEMA))
abort "loading #{TestDB::SCHEMA}: #{out}" unless status.success?

# Gives each test items of its own.
module Items
  @next = 1000
  @lock = Mutex.new
  def self.next
    @lock.synchronize { @next += 1 }
  end
end
