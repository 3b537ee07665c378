# frozen_string_literal: true

# The gem of the Ruby binding: lib/ and nothing to compile; it loads
# libreserve.so (the C library, installed separately) with ffi.
require_relative "lib/libreserve/version"

Gem::Specification.new do |s|
  s.name = "libreserve"
  s.version = Libreserve::VERSION
  s.summary = "Hold, claim and release stock without overselling (libreserve, over ffi)"
  s.description = "The Ruby binding of libreserve, the C library that keeps a shop from " \
                  "selling the same unit twice: holds in the same MariaDB/MySQL database " \
                  "as the stock ledger, one local transaction per step."
  s.authors = ["The libreserve authors"]
  s.license = "MIT"
  s.files = Dir.chdir(__dir__) { Dir["lib/**/*.rb"] + %w[README.md LICENSE] }
  s.require_paths = ["lib"]
  s.required_ruby_version = ">= 2.7"
  s.add_dependency "ffi", ">= 1.12", "< 2"
end
