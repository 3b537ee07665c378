# frozen_string_literal: true

module Libreserve
  # Counts the threads inside a call on a native handle (Batcher,
  # Migration), so that close never frees the handle under one of them.
  # Not part of the API.  The includer keeps @lock (a Mutex), @idle (a
  # ConditionVariable), @inside (0 at first), @ptr (nil once closed) and
  # @pid (the process that opened it), and names itself in inside_what;
  # its close waits on @idle while @inside is positive.
  module InsideCount
    private

    def inside
      p = @lock.synchronize do
        raise IOError, "the libreserve #{inside_what} is closed" if @ptr.nil?

        Libreserve.check_pid(@pid, inside_what)
        @inside += 1
        @ptr
      end
      begin
        yield p
      ensure
        @lock.synchronize do
          @inside -= 1
          @idle.broadcast if @inside.zero?
        end
      end
    end
  end
end
