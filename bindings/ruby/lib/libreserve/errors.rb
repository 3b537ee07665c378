# frozen_string_literal: true

module Libreserve
  # Every exception raised for one of the library's codes includes Error,
  # so `rescue Libreserve::Error` catches them all, whatever their class:
  # bad arguments are ArgumentErrors, the rest ReserveErrors.
  #
  #   code       the RSV_E* code (a negative Integer)
  #   code_name  its name, "RSV_EOUTOFSTOCK"
  #   strerror   the library's short text for the code
  #   detail     the library's message for this call (rsv_errmsg)
  #   errno      the server's (or Connector/C's) error number behind it
  #              (1045 for a wrong password), or nil
  #   failed_line  the cart line that could not be served (OutOfStock,
  #              NoItem of a reserve; 0 for reserve_one), or nil
  module Error
    attr_reader :code, :detail, :errno
    attr_accessor :failed_line

    def initialize(code, detail = nil)
      @code = code
      @detail = detail.nil? || detail.empty? ? strerror : detail
      found = @detail.scan(/\(MySQL error (\d+)\)/).last
      @errno = found && found.first.to_i
      @failed_line = nil
      super("#{@detail} (#{code_name})")
    end

    def code_name
      Native.rsv_code_name(code) || "RSV_CODE(#{code})"
    end

    def strerror
      Native.rsv_strerror(code)
    end

    # An outcome a checkout handles as business logic (out of stock,
    # already claimed, ...), not a failure.
    def expected?
      is_a?(ExpectedOutcome)
    end
  end

  class ReserveError < StandardError
    include Error
  end

  # Outcomes a checkout handles as business logic.
  class ExpectedOutcome < ReserveError; end
  # Failures: the server, the schema, the connection ...
  class Failure < ReserveError; end

  # A cart line cannot be covered; #failed_line says which (or nil).
  class OutOfStock < ExpectedOutcome; end
  class NotFound < ExpectedOutcome; end        # no such checkout
  class Expired < ExpectedOutcome; end         # the hold expired; units given back
  class AlreadyClaimed < ExpectedOutcome; end  # a repeated claim takes nothing
  class AlreadyReleased < ExpectedOutcome; end
  class Busy < ExpectedOutcome; end            # lock conflicts outlasted the retries
  class InDoubt < ExpectedOutcome; end         # outcome unknown: repeat with the same token

  # Not connected, or the connection was lost before COMMIT: nothing was
  # applied.
  class ConnectionError < Failure; end
  # The server refused the account (MariaDB error 1045, 1044, ...): the
  # code is RSV_ECONN, but reconnecting will not help, so it is no
  # ConnectionError, which a retry loop repeats.
  class AuthenticationError < Failure; end
  class NoItem < Failure; end            # no stock ledger row for the item and location
  class SchemaError < Failure; end
  class SchemaVersionError < Failure; end
  class UnsupportedServer < Failure; end
  class InTransaction < Failure; end
  class OutOfMemory < Failure; end
  class DatabaseError < Failure; end
  class StockError < Failure; end        # the change would go below what is held
  class ConfigError < Failure; end
  class OutOfRange < Failure; end
  class Disabled < Failure; end          # switched off, or the batcher is closing
  class Canceled < Failure; end
  # the server takes no writes (a replica, a Galera node outside the
  # primary component): nothing applied; reconnect and repeat
  class NotPrimary < ConnectionError; end

  # An invalid argument (RSV_EINVAL), refused before anything was sent.
  class InvalidArgument < ArgumentError
    include Error
  end
  class InvalidQuantity < InvalidArgument; end # RSV_EQUANTITY: a quantity or ttl
  class InvalidToken < InvalidArgument; end    # RSV_ETOKEN
  class EmptyCart < InvalidArgument; end       # RSV_EEMPTY
  class CartTooBig < InvalidArgument; end      # RSV_ETOOBIG

  ERRORS = {
    -1 => OutOfStock, -2 => NotFound, -3 => Expired, -4 => AlreadyClaimed,
    -5 => AlreadyReleased, -6 => Busy, -7 => InDoubt, -8 => ConnectionError,
    -10 => InvalidArgument, -11 => InvalidQuantity, -12 => EmptyCart,
    -13 => InvalidToken, -14 => NoItem, -15 => SchemaError,
    -16 => UnsupportedServer, -17 => InTransaction, -18 => OutOfMemory,
    -19 => DatabaseError, -20 => CartTooBig, -21 => StockError,
    -22 => ConfigError, -23 => OutOfRange, -24 => Disabled,
    -25 => SchemaVersionError, -26 => Canceled, -27 => NotPrimary
  }.freeze

  # Server error numbers that mean the account was refused: access denied
  # (1044, 1045, 1698), password expired (1820, 1862), unknown
  # authentication plugin (1251, 2059).
  AUTH_ERRNOS = [1044, 1045, 1251, 1698, 1820, 1862, 2059].freeze

  # The exception for a code and the library's message.
  def self.error_for(code, detail = nil)
    klass = ERRORS.fetch(code) { code >= -7 ? ExpectedOutcome : Failure }
    e = klass.new(code, detail)
    e = AuthenticationError.new(code, detail) if klass == ConnectionError && AUTH_ERRNOS.include?(e.errno)
    e
  end

  # The error of a call of one line (reserve_one): its line is line 0, as
  # the library's message says.
  def self.one_line(err)
    err.failed_line = 0 if err.is_a?(OutOfStock) || err.is_a?(NoItem)
    err
  end
end
