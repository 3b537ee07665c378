# frozen_string_literal: true

# README.md as a user follows it: the gem is built and installed with the
# commands it prints (into a scratch GEM_HOME, from a copy of the
# binding), and its program runs, exactly as printed but for the
# connection string, from a directory outside the tree.

require_relative "helper"
require "fileutils"
require "tmpdir"

class TestReadme < Minitest::Test
  HERE = File.expand_path("..", __dir__)

  def block(lang, marker)
    README.scan(/^```#{lang}\n(.*?)^```$/m).flatten.find { |b| b.include?(marker) } or
      flunk "README.md has no #{lang} block with #{marker.inspect}"
  end

  README = File.read(File.join(HERE, "README.md"))

  def run_cmd(env, *cmd, chdir:)
    out, status = Open3.capture2e(env, *cmd, chdir: chdir)
    assert status.success?, "#{cmd.join(' ')}: #{out}"
    out
  end

  def test_install_and_program
    Dir.mktmpdir("rsv-ruby-readme") do |tmp|
      src = File.join(tmp, "src")
      FileUtils.cp_r(HERE, src)
      FileUtils.rm_rf(Dir[File.join(src, "*.gem")])
      gems = File.join(tmp, "gems")
      system_gems = Gem.path.join(File::PATH_SEPARATOR)
      # (a gemrc of the test's own only skips building the gem's ri pages)
      gemrc = File.join(tmp, "gemrc")
      File.write(gemrc, "gem: --no-document\n")
      env = { "GEM_HOME" => gems, "GEM_PATH" => [gems, system_gems].join(File::PATH_SEPARATOR), "RUBYLIB" => nil,
              "RUBYOPT" => nil, "GEMRC" => gemrc }
      install = block("sh", "gem install")
      assert_match(/\Acd bindings\/ruby\n/, install)
      install.lines.drop(1).each { |line| run_cmd(env, "sh", "-ec", line, chdir: src) }
      assert File.exist?(File.join(gems, "specifications", "libreserve-#{Libreserve::VERSION}.gemspec"))

      program = block("ruby", "Libreserve.open")
      lines = program.lines.reject { |l| l.strip.empty? }.size
      assert_operator lines, :<=, 11, "the README's program has #{lines} lines"
      assert_match(/ENV\.fetch\("RSV_DSN", ""\)\ndsn = "mariadb:\/\/.*" if dsn\.empty\?/, program, "the README's program reads RSV_DSN")
      env = env.merge("RSV_DSN" => TestDB.dsn)
      run = File.join(tmp, "run")
      Dir.mkdir(run)
      File.write(File.join(run, "checkout.rb"), program)
      first = run_cmd(env, "ruby", "checkout.rb", chdir: run)
      assert_equal "sold 2 hoodies\n", first
      second = run_cmd(env, "ruby", "checkout.rb", chdir: run)
      assert_equal "checkout-9001 was already claimed\n", second
      loaded = run_cmd(env, "ruby", "-e", 'require "libreserve"; puts $LOADED_FEATURES.grep(/libreserve\.rb/)', chdir: run)
      assert loaded.start_with?(gems), "the program loaded #{loaded}, not the installed gem"
    end
  end
end
