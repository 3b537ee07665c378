# frozen_string_literal: true

require "ffi"

module Libreserve
  # The C library could not be loaded (raised by require "libreserve"):
  # #tried lists each place looked in and why it failed, in order.  Not a
  # LoadError, which would read as a missing gem.
  class LibraryNotFound < StandardError
    attr_reader :tried

    def initialize(tried)
      @tried = tried
      super("libreserve: cannot load the C library libreserve.so.0; tried #{tried.join('; ')}.  " \
            "Install it (make install), or set LIBRESERVE_PATH to the library or its directory, " \
            "or PKG_CONFIG_PATH to the directory of reserve.pc")
    end
  end

  # Native owns loading libreserve.so and the C functions the gem calls.
  # Which library is loaded, first match wins: the one LIBRESERVE_PATH
  # names (a file, or a directory holding libreserve.so.0; nothing else is
  # tried then), the directory `pkg-config --variable=libdir reserve`
  # reports, libreserve.so.0 as the system's dynamic loader finds it, then
  # the in-tree build of the source tree the gem is used from (a
  # checkout: bindings/ruby/lib in it).
  module Native
    extend FFI::Library

    def self.in_dir(dir)
      %w[libreserve.so.0 libreserve.so].map { |n| File.join(dir, n) }.find { |p| File.exist?(p) }
    end

    def self.pkg_config_libdir(tried)
      out = IO.popen([ENV.fetch("PKG_CONFIG", "pkg-config"), "--variable=libdir", "reserve"], err: File::NULL, &:read)
      libdir = out.to_s.strip
      return libdir if $?.success? && !libdir.empty?

      tried << "pkg-config --variable=libdir reserve (no reserve.pc in its search path)"
      nil
    rescue SystemCallError => e
      tried << "pkg-config (#{e.message})"
      nil
    end

    # [where, file] pairs to try, in order; the places passed over are
    # noted in tried.
    def self.candidates(tried)
      env = ENV["LIBRESERVE_PATH"]
      if env && !env.empty?
        file = File.directory?(env) ? in_dir(env) : env
        raise LibraryNotFound.new(["LIBRESERVE_PATH=#{env} (no libreserve.so.0 or libreserve.so in that directory)"]), cause: nil unless file

        return [["LIBRESERVE_PATH", file]]
      end
      tried << "LIBRESERVE_PATH (not set)"
      out = []
      if (libdir = pkg_config_libdir(tried))
        file = in_dir(libdir)
        if file
          out << ["pkg-config's libdir", file]
        else
          tried << "pkg-config's libdir #{libdir} (no libreserve.so.0 there)"
        end
      end
      out << ["the system loader", "libreserve.so.0"]
      tree = File.expand_path("../../../..", __dir__)
      in_tree = File.join(tree, "build", "libreserve.so.0")
      out << ["the source tree's build", in_tree] if File.exist?(File.join(tree, "include", "reserve.h")) && File.exist?(in_tree)
      out
    end

    tried = []
    LIBRARY = candidates(tried).find do |where, path|
      ffi_lib path
      true
    rescue LoadError => e
      tried << "#{where}: #{path} (#{e.message})"
      false
    end&.last
    # (cause: nil: required through rubygems, the LoadError of its first
    # attempt would be printed under ours as "cannot load such file --
    # libreserve", which reads as a missing gem)
    raise LibraryNotFound.new(tried), cause: nil unless LIBRARY

    # struct rsv_options (reserve.h), version 1.  A newer library may have
    # appended fields (the version tells it which the gem fills); a library
    # whose struct is smaller than this one is older than the gem.
    class Options < FFI::Struct
      layout :version, :uint,
             :flags, :uint32,
             :pool_cap, :int64,
             :refill_low_water, :int64,
             :hold_ttl_ms, :int64,
             :max_retries, :int32,
             :retry_base_us, :int32,
             :lock_wait_timeout_s, :int32,
             :conn_tag_prefix, :pointer,
             :settled_retention_s, :int64,
             :pool_idle_s, :int64,
             :call_timeout_ms, :int64,
             :stmt_cache_max, :int32
    end

    callback :audit_fn, %i[pointer uint64 uint64 uint64 string], :void

    # Functions that never wait for the server keep the GVL.
    attach_function :rsv_version, [], :string
    attach_function :rsv_strerror, [:int], :string
    attach_function :rsv_code_name, [:int], :string
    attach_function :rsv_options_init, %i[pointer uint], :int
    attach_function :rsv_options_size, [], :size_t
    attach_function :rsv_errmsg, [:pointer], :string
    attach_function :rsv_cart_new, [:pointer], :int
    attach_function :rsv_cart_free, [:pointer], :void
    attach_function :rsv_cart_add, %i[pointer uint64 pointer size_t int64 uint32], :int
    attach_function :rsv_cart_allocation_count, %i[pointer size_t pointer], :int
    attach_function :rsv_cart_allocation, %i[pointer size_t size_t pointer pointer], :int
    attach_function :rsv_cart_failed_line, [:pointer], :size_t
    attach_function :rsv_stats_get, %i[pointer uint32 uint32 pointer], :int
    attach_function :rsv_set_enabled, %i[pointer int], :int
    attach_function :rsv_batcher_stats_get, %i[pointer uint32 uint32 pointer], :int
    attach_function :rsv_stats_snapshot_new, [:pointer], :int
    attach_function :rsv_stats_snapshot_free, [:pointer], :void
    attach_function :rsv_stats_snapshot_add, %i[pointer pointer], :int
    attach_function :rsv_batcher_stats_snapshot_add, %i[pointer pointer], :int
    attach_function :rsv_stats_prometheus, %i[pointer string pointer size_t pointer], :int

    # Functions that talk to the server release the GVL while they run
    # (blocking: true), so the process's other threads go on meanwhile.
    {
      rsv_open_dsn: %i[pointer string pointer],
      rsv_reconnect: [:pointer],
      rsv_reserve: %i[pointer uint64 pointer size_t pointer int64],
      rsv_reserve_one: %i[pointer uint64 pointer size_t uint64 uint64 int64 int64],
      rsv_claim: %i[pointer uint64 pointer size_t],
      rsv_release: %i[pointer uint64 pointer size_t],
      rsv_extend: %i[pointer uint64 pointer size_t int64],
      rsv_checkout_status: %i[pointer uint64 pointer size_t pointer pointer pointer],
      rsv_reserve_batch: %i[pointer size_t pointer pointer pointer pointer pointer pointer int64 pointer],
      rsv_claim_batch: %i[pointer size_t pointer pointer pointer pointer],
      rsv_release_batch: %i[pointer size_t pointer pointer pointer pointer],
      rsv_replenish: %i[pointer uint64 uint64 uint64 pointer],
      rsv_pool_drain: %i[pointer uint64 uint64 uint64 pointer],
      rsv_sweep: %i[pointer uint64 int64 pointer],
      rsv_stock_set: %i[pointer uint64 uint64 uint64 int64],
      rsv_stock_adjust: %i[pointer uint64 uint64 uint64 int64 pointer],
      rsv_stock_get: %i[pointer uint64 uint64 uint64 pointer pointer pointer pointer],
      rsv_audit: %i[pointer uint64 int audit_fn pointer pointer],
      rsv_batcher_open: %i[pointer string pointer uint32],
      rsv_batcher_reserve_one: %i[pointer uint64 pointer size_t uint64 uint64 int64 int64],
      rsv_batcher_reserve: %i[pointer uint64 pointer size_t pointer int64],
      rsv_reserve_cart_batch: %i[pointer size_t pointer pointer pointer pointer int64 pointer],
      rsv_batcher_claim: %i[pointer uint64 pointer size_t],
      rsv_batcher_release: %i[pointer uint64 pointer size_t]
    }.each { |name, args| attach_function name, args, :int, blocking: true }
    attach_function :rsv_close, [:pointer], :void, blocking: true
    attach_function :rsv_batcher_close, [:pointer], :void, blocking: true

    if Options.size > rsv_options_size
      raise LoadError, "#{LIBRARY}: struct rsv_options is #{rsv_options_size} bytes, the gem expects #{Options.size} (a libreserve older than the gem?)"
    end
  end
end
